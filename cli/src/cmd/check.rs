//! `kubectl kruise check`: one ✔/✖ line per thing a working Kruise needs, a fix under every ✖,
//! exit 0 only when all pass (`linkerd check` is the model).

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_api::features::{self, FeatureGates};
use kruise_api::keys;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use serde::Serialize;
use serde_json::Value;

use crate::cli::CheckArgs;
use crate::ctx::Ctx;
use crate::dev::{self, Images, cluster};
use crate::error::{CliError, Result, exit, kube_err};

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

/// Label selector of the daemon's Pods (`deploy/daemon/daemon.yaml`).
const DAEMON_SELECTOR: &str = "app.kubernetes.io/name=kruise-daemon";

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
        out.push(check_crd(client, crd).await?);
    }
    let installed = cluster::installed(client).await?;
    let dev_url = cluster::webhook_target(client)
        .await?
        .filter(|t| t.starts_with("https://"));
    out.extend(check_webhooks(client).await?);
    out.push(check_lease(client).await?);
    out.push(check_daemon(client).await?);
    out.push(match &installed {
        Some(i) => Check::pass(
            "manager",
            format!(
                "{} {} (Deployment {}, {} ready, image {})",
                i.flavor, i.version, i.deployment, i.ready, i.image
            ),
        ),
        None => match &dev_url {
            Some(url) => Check::pass(
                "manager",
                format!("Kruise-rs in dev mode (webhook at {url}, not in the cluster)"),
            ),
            None => Check::fail(
                "manager",
                format!(
                    "no Deployment {}/{}",
                    keys::KRUISE_NAMESPACE,
                    dev::MANAGER_DEPLOYMENT
                ),
                FIX_INSTALL,
            ),
        },
    });
    out.push(skew(env!("CARGO_PKG_VERSION"), installed.as_ref()));
    if let Some(i) = &installed {
        out.push(feature_gates(i.feature_gates.as_deref()));
    }
    Ok(out)
}

/// The installed manager's gates that differ from OpenKruise's defaults (what its
/// `--feature-gates` asks for, after upstream's rules between gates).
pub fn feature_gates(flag: Option<&str>) -> Check {
    const NAME: &str = "feature gates";
    match FeatureGates::parse(flag.unwrap_or_default()) {
        Ok(gates) => {
            let diff = gates.differences();
            if diff.is_empty() {
                Check::pass(NAME, "OpenKruise's defaults")
            } else {
                let list: Vec<String> = diff
                    .iter()
                    .map(|(g, on)| format!("{}={on}", g.name()))
                    .collect();
                Check::pass(
                    NAME,
                    format!("differ from OpenKruise's defaults: {}", list.join(", ")),
                )
            }
        }
        Err(e) => Check::fail(
            NAME,
            format!("the manager's {} does not parse: {e}", features::FLAG),
            format!(
                "correct the {} argument of Deployment {}/{} (the Helm value featureGates)",
                features::FLAG,
                keys::KRUISE_NAMESPACE,
                dev::MANAGER_DEPLOYMENT
            ),
        ),
    }
}

/// Compares the plugin's version with the server's (major.minor must agree).
pub fn skew(plugin: &str, server: Option<&cluster::Installed>) -> Check {
    const NAME: &str = "version skew";
    let Some(server) = server else {
        return Check::pass(
            NAME,
            format!("plugin {plugin}; no in-cluster manager to compare"),
        );
    };
    if server.flavor == cluster::Flavor::OpenKruise {
        return Check::pass(
            NAME,
            format!(
                "plugin {plugin} drives OpenKruise {} through its APIs (v1alpha1/v1beta1)",
                server.version
            ),
        );
    }
    let minor = |v: &str| {
        let mut it = v.trim_start_matches('v').split('.');
        match (it.next(), it.next()) {
            (Some(a), Some(b)) if a.parse::<u64>().is_ok() && b.parse::<u64>().is_ok() => {
                Some(format!("{a}.{b}"))
            }
            _ => None,
        }
    };
    match minor(&server.version) {
        None => Check::pass(
            NAME,
            format!(
                "plugin {plugin}, server {} (a development build: not compared)",
                server.version
            ),
        ),
        Some(s) if Some(&s) == minor(plugin).as_ref() => {
            Check::pass(NAME, format!("plugin {plugin}, server {}", server.version))
        }
        Some(_) => Check::fail(
            NAME,
            format!("plugin {plugin}, server {}", server.version),
            format!(
                "use the plugin of the server's version (kubectl krew upgrade kruise), or upgrade the server: kubectl kruise install --version v{plugin} --wait"
            ),
        ),
    }
}

async fn check_crd(client: &Client, crd: &Value) -> Result<Check> {
    let name = dev::name(crd);
    let title = format!("CRD {name}");
    let want: Vec<&str> = crd["spec"]["versions"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter(|v| v["served"].as_bool().unwrap_or(false))
                .filter_map(|v| v["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let Some(have) = api.get_opt(name).await.map_err(kube_err)? else {
        return Ok(Check::fail(title, "not installed", FIX_INSTALL));
    };
    let served: Vec<String> = have
        .spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.clone())
        .collect();
    let missing: Vec<&str> = want
        .iter()
        .copied()
        .filter(|w| !served.iter().any(|s| s == w))
        .collect();
    let established = have
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
    Ok(if !missing.is_empty() {
        Check::fail(
            title,
            format!(
                "serves {} but not {}",
                served.join(", "),
                missing.join(", ")
            ),
            "update the CRDs: kubectl kruise install --wait",
        )
    } else if !established {
        Check::fail(
            title,
            "not Established",
            format!("kubectl describe crd {name} (see its conditions)"),
        )
    } else {
        Check::pass(title, format!("serves {}", served.join(", ")))
    })
}

async fn check_webhooks(client: &Client) -> Result<Vec<Check>> {
    let mut out = Vec::new();
    let m: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let mutating = m
        .get_opt(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .map_err(kube_err)?
        .map(|c| {
            c.webhooks
                .unwrap_or_default()
                .into_iter()
                .map(|w| (w.name, w.client_config))
                .collect::<Vec<_>>()
        });
    let v: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let validating = v
        .get_opt(keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .map_err(kube_err)?
        .map(|c| {
            c.webhooks
                .unwrap_or_default()
                .into_iter()
                .map(|w| (w.name, w.client_config))
                .collect::<Vec<_>>()
        });
    for (name, hooks) in [
        (keys::MUTATING_WEBHOOK_CONFIGURATION_NAME, mutating),
        (keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME, validating),
    ] {
        let title = format!("webhook configuration {name}");
        let Some(hooks) = hooks else {
            out.push(Check::fail(
                title,
                "missing",
                "the manager creates it when its webhook starts: kubectl -n kruise-system logs deploy/kruise-controller-manager",
            ));
            continue;
        };
        out.push(check_hooks(client, title, &hooks).await);
    }
    Ok(out)
}

async fn check_hooks(
    client: &Client,
    title: String,
    hooks: &[(String, WebhookClientConfig)],
) -> Check {
    let Some((_, first)) = hooks.first() else {
        return Check::fail(title, "has no webhooks", FIX_INSTALL);
    };
    for (hook, cc) in hooks {
        if let Err(why) = ca_bundle_valid(cc) {
            return Check::fail(
                title,
                format!("webhook {hook}: {why}"),
                "restart the manager so it re-registers its CA: kubectl -n kruise-system rollout restart deploy/kruise-controller-manager",
            );
        }
    }
    match endpoint_answers(client, first).await {
        Ok(at) => Check::pass(
            title,
            format!("{} webhooks, caBundle valid, {at} answers", hooks.len()),
        ),
        Err(why) => Check::fail(
            title,
            why,
            "is the manager running and Ready? kubectl -n kruise-system get pods; in dev mode, is `kubectl kruise dev` running?",
        ),
    }
}

/// The caBundle is a PEM certificate that has not expired.
fn ca_bundle_valid(cc: &WebhookClientConfig) -> std::result::Result<(), String> {
    let Some(ca) = &cc.ca_bundle else {
        return Err("no caBundle".into());
    };
    let pem = String::from_utf8(ca.0.clone()).map_err(|_| "caBundle is not PEM text".to_owned())?;
    let not_after = kruise_webhook::certs::not_after(&pem)
        .ok_or_else(|| "caBundle is not a PEM certificate".to_owned())?;
    if not_after <= std::time::SystemTime::now() {
        return Err("caBundle certificate has expired".into());
    }
    Ok(())
}

/// Asks the webhook's `/healthz`: through the API server's Service proxy in cluster, by a TCP
/// connection to a dev-mode URL.
async fn endpoint_answers(
    client: &Client,
    cc: &WebhookClientConfig,
) -> std::result::Result<String, String> {
    if let Some(s) = &cc.service {
        let port = s.port.unwrap_or(443);
        let path = format!(
            "/api/v1/namespaces/{}/services/https:{}:{port}/proxy{}",
            s.namespace,
            s.name,
            keys::WEBHOOK_HEALTHZ_PATH
        );
        let req = http::Request::get(&path)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let at = format!("service {}/{}", s.namespace, s.name);
        return match tokio::time::timeout(Duration::from_secs(5), client.request_text(req)).await {
            Ok(Ok(_)) => Ok(at),
            Ok(Err(e)) => Err(format!("{at} does not answer /healthz: {e}")),
            Err(_) => Err(format!("{at} does not answer /healthz within 5s")),
        };
    }
    let Some(url) = &cc.url else {
        return Err("neither a Service nor a URL".into());
    };
    let authority = url
        .split_once("://")
        .map_or(url.as_str(), |(_, r)| r)
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    match tokio::time::timeout(
        Duration::from_secs(3),
        tokio::net::TcpStream::connect(&authority),
    )
    .await
    {
        Ok(Ok(_)) => Ok(url.clone()),
        Ok(Err(e)) => Err(format!("{url} refuses connections: {e}")),
        Err(_) => Err(format!("{url} does not accept a connection within 3s")),
    }
}

async fn check_lease(client: &Client) -> Result<Check> {
    let title = "leader";
    let api: Api<Lease> = Api::namespaced(client.clone(), keys::KRUISE_NAMESPACE);
    let Some(lease) = api
        .get_opt(kruise_manager::app::LEASE_NAME)
        .await
        .map_err(kube_err)?
    else {
        return Ok(Check::fail(
            title,
            format!(
                "no Lease {}/{}",
                keys::KRUISE_NAMESPACE,
                kruise_manager::app::LEASE_NAME
            ),
            "no manager has started: kubectl -n kruise-system get pods",
        ));
    };
    let spec = lease.spec.unwrap_or_default();
    let holder = spec.holder_identity.unwrap_or_default();
    let fresh = spec.renew_time.as_ref().is_some_and(|t| {
        let age = jiff::Timestamp::now().duration_since(t.0);
        let valid = i64::from(spec.lease_duration_seconds.unwrap_or(15));
        age.as_secs() <= valid
    });
    Ok(if holder.is_empty() || !fresh {
        Check::fail(
            title,
            format!(
                "Lease {} is not held (holder {:?}, expired)",
                lease.metadata.name.unwrap_or_default(),
                holder
            ),
            "the manager lost or never took the lease: kubectl -n kruise-system logs deploy/kruise-controller-manager",
        )
    } else {
        Check::pass(title, format!("held by {holder}"))
    })
}

async fn check_daemon(client: &Client) -> Result<Check> {
    let title = "daemon";
    if cluster::daemonset(client).await?.is_none() {
        return Ok(Check::fail(
            title,
            format!(
                "DaemonSet {}/{} not found",
                keys::KRUISE_NAMESPACE,
                dev::DAEMON_DAEMONSET
            ),
            FIX_INSTALL,
        ));
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), keys::KRUISE_NAMESPACE);
    let node_names: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .map_err(kube_err)?
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    let ready_on: Vec<String> = pods
        .list(&ListParams::default().labels(DAEMON_SELECTOR))
        .await
        .map_err(kube_err)?
        .items
        .iter()
        .filter(|p| pod_ready(p))
        .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .collect();
    let missing: Vec<&String> = node_names
        .iter()
        .filter(|n| !ready_on.contains(n))
        .collect();
    Ok(if missing.is_empty() {
        Check::pass(
            title,
            format!("a Ready Pod on each of {} nodes", node_names.len()),
        )
    } else {
        Check::fail(
            title,
            format!(
                "no Ready daemon Pod on {}",
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!(
                "kubectl -n {} describe daemonset {} (tainted node? image pull?)",
                keys::KRUISE_NAMESPACE,
                dev::DAEMON_DAEMONSET
            ),
        )
    })
}

fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cluster::{Flavor, Installed};

    fn server(flavor: Flavor, version: &str) -> Installed {
        Installed {
            flavor,
            version: version.into(),
            deployment: "kruise-system/kruise-controller-manager".into(),
            image: String::new(),
            ready: 1,
            feature_gates: None,
        }
    }

    #[test]
    fn feature_gates_line_lists_what_differs_from_openkruise() {
        let c = feature_gates(None);
        assert!(c.ok);
        assert_eq!(c.detail, "OpenKruise's defaults");
        let c = feature_gates(Some(
            "ImagePullJobGate=true,InPlaceWorkloadVerticalScaling=true",
        ));
        assert!(c.ok);
        assert_eq!(
            c.detail,
            "differ from OpenKruise's defaults: ImagePullJobGate=true, InPlaceWorkloadVerticalScaling=true"
        );
        // After upstream's rules: pre-download also turns the pull-job gate on.
        let c = feature_gates(Some("PreDownloadImageForInPlaceUpdate=true"));
        assert!(
            c.detail
                .contains("PreDownloadImageForInPlaceUpdate=true, ImagePullJobGate=true"),
            "{}",
            c.detail
        );
        // Naming a gate at its default is no difference.
        assert_eq!(
            feature_gates(Some("PodWebhook=true")).detail,
            "OpenKruise's defaults"
        );
        let c = feature_gates(Some("NoSuchGate=true"));
        assert!(!c.ok);
        assert!(c.detail.contains("NoSuchGate"), "{}", c.detail);
        assert!(c.fix.is_some());
    }

    #[test]
    fn skew_fails_on_another_minor_and_names_the_fix() {
        let c = skew("0.1.0", Some(&server(Flavor::KruiseRs, "0.2.1")));
        assert!(!c.ok);
        assert!(
            c.fix
                .as_deref()
                .unwrap_or_default()
                .contains("--version v0.1.0")
        );
        assert!(skew("0.1.0", Some(&server(Flavor::KruiseRs, "0.1.7"))).ok);
        assert!(skew("0.1.0", Some(&server(Flavor::KruiseRs, "dev"))).ok);
        assert!(skew("0.1.0", Some(&server(Flavor::OpenKruise, "1.8.0"))).ok);
    }

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

    #[test]
    fn a_garbage_ca_bundle_is_invalid() {
        let cc = WebhookClientConfig {
            ca_bundle: Some(k8s_openapi::ByteString(b"not a cert".to_vec())),
            ..Default::default()
        };
        assert!(ca_bundle_valid(&cc).is_err());
        assert!(ca_bundle_valid(&WebhookClientConfig::default()).is_err());
    }
}
