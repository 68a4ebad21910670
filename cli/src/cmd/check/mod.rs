//! `kubectl kruise check`: one ✔/✖ line per thing a working Kruise needs, a fix under every ✖,
//! exit 0 only when all pass (`linkerd check` is the model).
//!
//! This module holds the result type ([`Check`]), the report and the order of the checks; each
//! group of checks is a module of its own: `crds`, `webhooks`, `blast` (what a down manager would
//! refuse), `manager` (leader, version skew, feature gates, deletion protection's list-all
//! switch) and `daemon`.

mod blast;
mod crds;
mod daemon;
mod manager;
mod webhooks;

use kube::Client;
use serde::Serialize;

use crate::cli::CheckArgs;
use crate::ctx::Ctx;
use crate::dev::{self, Images, cluster};
use crate::error::{CliError, Result, exit};

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What was checked (`CRD clonesets.apps.kruise.io`).
    pub name: String,
    pub ok: bool,
    /// What was found.
    pub detail: String,
    /// What to do about a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn pass(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ok: true,
            detail: detail.into(),
            fix: None,
        }
    }

    fn fail(name: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

const FIX_INSTALL: &str =
    "kubectl kruise install --wait (or kubectl apply --server-side -k deploy/)";

/// Runs every check, prints the report; exit 0 only when all pass.
#[tracing::instrument(skip_all)]
pub async fn run(ctx: &Ctx, args: &CheckArgs) -> Result<i32> {
    let checks = checks(&ctx.client).await?;
    let ok = checks.iter().all(|c| c.ok);
    if args.output == Some(crate::cli::Output::Json) {
        let out = serde_json::json!({"ok": ok, "checks": checks});
        let text =
            serde_json::to_string_pretty(&out).map_err(|e| CliError::Failed(e.to_string()))?;
        dev::print_out(&format!("{text}\n"))
    } else {
        dev::print_out(&render(&checks, crate::no_color_env()))
    }
    .map_err(|e| CliError::Failed(format!("writing stdout: {e}")))?;
    Ok(if ok { exit::OK } else { exit::FAILED })
}

/// The text report.
pub fn render(checks: &[Check], no_color: bool) -> String {
    let (good, bad) = if no_color {
        ("✔", "✖")
    } else {
        ("\x1b[32m✔\x1b[0m", "\x1b[31m✖\x1b[0m")
    };
    let mut out = String::new();
    for c in checks {
        let mark = if c.ok { good } else { bad };
        out.push_str(&format!("{mark} {}: {}\n", c.name, c.detail));
        if let Some(fix) = &c.fix {
            out.push_str(&format!("    fix: {fix}\n"));
        }
    }
    let failed = checks.iter().filter(|c| !c.ok).count();
    if failed == 0 {
        out.push_str(&format!("all {} checks passed\n", checks.len()));
    } else {
        out.push_str(&format!("{failed} of {} checks failed\n", checks.len()));
    }
    out
}

/// Every check, in report order.
pub async fn checks(client: &Client) -> Result<Vec<Check>> {
    let objects = dev::objects(&Images::default()).map_err(|e| CliError::Failed(e.to_string()))?;
    let mut out = Vec::new();
    for crd in dev::crds(&objects) {
        out.push(crds::check_crd(client, crd).await?);
    }
    let installed = cluster::installed(client).await?;
    let dev_url = cluster::webhook_target(client)
        .await?
        .filter(|t| t.starts_with("https://"));
    out.extend(webhooks::check_webhooks(client).await?);
    out.push(blast::check_blast_radius(client).await?);
    out.push(manager::check_lease(client).await?);
    out.push(daemon::check_daemon(client).await?);
    out.push(manager::manager(installed.as_ref(), dev_url.as_deref()));
    out.push(manager::skew(env!("CARGO_PKG_VERSION"), installed.as_ref()));
    if let Some(i) = &installed {
        out.push(manager::feature_gates(i.feature_gates.as_deref()));
        out.push(manager::check_list_all(client, i.feature_gates.as_deref()).await?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_has_a_fix_under_each_failure() {
        let text = render(
            &[
                Check::pass("CRD clonesets.apps.kruise.io", "serves v1alpha1"),
                Check::fail(
                    "daemon",
                    "DaemonSet kruise-system/kruise-daemon not found",
                    FIX_INSTALL,
                ),
            ],
            true,
        );
        assert_eq!(
            text,
            format!(
                "✔ CRD clonesets.apps.kruise.io: serves v1alpha1\n✖ daemon: DaemonSet kruise-system/kruise-daemon not found\n    fix: {FIX_INSTALL}\n1 of 2 checks failed\n"
            )
        );
    }
}
