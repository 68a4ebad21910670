//! The running manager as a test sees it from outside: its log, and a configuration of its own
//! for the length of one test (an environment variable, a `--feature-gates` set), put back
//! afterwards. The way depends on the mode ([`crate::mode`]):
//!
//! - in cluster, the installed Deployment's container is patched and rolled out; the old
//!   container spec is patched back, and rolled out again, when the guard is restored or dropped;
//! - in dev mode the host process is restarted by `hack/dev-up.sh` with the environment added,
//!   and restarted without it afterwards.
//!
//! Reconfiguring takes the manager away for a moment: only tests of the serial phase may do it.
//!
//! Tests of a gate that is off by default (as upstream) run in the gated phase instead: named
//! `gated_…`, in parallel, against a manager that `kruise-e2e-gates on` has started once with
//! every gate of [`GATED_PHASE`] on (`hack/test.sh`, after the serial phase). Such a test calls
//! [`require_gates`] first and must hold with all of those gates on together, as a user who
//! turns several on would run them.

use std::process::Command;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, LogParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use kruise_api::features::Gate;

use crate::mode::{self, KRUISE_NS, MANAGER_POD_SELECTOR, Mode};
use crate::{Error, Result, pod_ready, repo_root, wait_for};

/// Name of the installed manager's Deployment (deploy/manager/manager.yaml).
pub const MANAGER_DEPLOYMENT: &str = "kruise-controller-manager";

/// How long a reconfigured manager may take to roll out and lead again.
const ROLLOUT: Duration = Duration::from_secs(180);

/// What a test changes in the manager's configuration.
#[derive(Debug, Clone, Default)]
pub struct ManagerConfig {
    /// Environment variables added (or overriding the installed value).
    pub env: Vec<(String, String)>,
    /// Arguments added after the installed ones (e.g. `--feature-gates=A=true`).
    pub args: Vec<String>,
}

impl ManagerConfig {
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_owned());
        self
    }

    /// Feature gates (`Name=true,Other=false`) on top of the installed ones.
    pub fn gates(self, gates: &str) -> Self {
        self.arg(&format!("{FEATURE_GATES_FLAG}{gates}"))
    }
}

const FEATURE_GATES_FLAG: &str = "--feature-gates=";

/// The gates the gated phase turns on, off by default in what Kruise-rs ships (as upstream).
pub const GATED_PHASE: &[Gate] = &[
    Gate::PreDownloadImageForInPlaceUpdate,
    Gate::RecreatePodWhenChangeVCTInCloneSetGate,
    Gate::DeletionProtectionForCRDCascadingGate,
    Gate::PreDownloadImageForDaemonSetUpdate,
    Gate::EnableSortSidecarContainerByName,
    // Acts only on Pods a PodProbeMarker selects (annotations) and on Pods of a node labelled
    // `type: virtual-kubelet`, which only its own test creates.
    Gate::EnablePodProbeMarkerOnServerless,
    Gate::StatefulSetAutoResizePVCGate,
];

/// `Name=true,…` for the gates of the gated phase.
fn gated_phase_value() -> String {
    GATED_PHASE
        .iter()
        .map(|g| format!("{}=true", g.name()))
        .collect::<Vec<_>>()
        .join(",")
}

/// Starts the installed manager with the gated phase's gates on, and leaves it so.
pub async fn gated_phase_on(client: &Client) -> Result<()> {
    let mut guard = reconfigure(
        client,
        &ManagerConfig::default().gates(&gated_phase_value()),
    )
    .await?;
    // Kept on for the whole phase; [`gated_phase_off`] puts the installed flag back.
    guard.restored = true;
    Ok(())
}

/// The installed `--feature-gates` value with the gated phase's additions taken out.
fn without_gated_phase(args: &[String]) -> Vec<String> {
    let added: Vec<String> = GATED_PHASE
        .iter()
        .map(|g| format!("{}=true", g.name()))
        .collect();
    args.iter()
        .map(|a| match a.strip_prefix(FEATURE_GATES_FLAG) {
            Some(gates) => format!(
                "{FEATURE_GATES_FLAG}{}",
                gates
                    .split(',')
                    .filter(|g| !added.iter().any(|a| a == g))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            None => a.clone(),
        })
        .collect()
}

/// Puts the manager back as installed after the gated phase (nothing to do if it is).
pub async fn gated_phase_off(client: &Client) -> Result<()> {
    let (env, args) = installed_env_args(client).await?;
    let restored = without_gated_phase(&args);
    if restored == args {
        return Ok(());
    }
    roll_out(client, env, json!(restored)).await
}

/// The manager container's `env` (as JSON) and `args`, as the Deployment has them now.
async fn installed_env_args(client: &Client) -> Result<(Value, Vec<String>)> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), KRUISE_NS);
    let current = serde_json::to_value(deployments.get(MANAGER_DEPLOYMENT).await?)?;
    let container = &current["spec"]["template"]["spec"]["containers"][0];
    let args = serde_json::from_value(container["args"].clone()).unwrap_or_default();
    Ok((container["env"].clone(), args))
}

/// Fails unless the running manager has each of `gates` on: a gated-phase test checks this first,
/// so that run anywhere else it says why instead of failing on a behaviour.
pub async fn require_gates(client: &Client, gates: &[Gate]) -> Result<()> {
    if mode::mode() == Mode::Dev {
        return Err(Error::Mode(
            "gated tests run against the installed manager".into(),
        ));
    }
    let (_, args) = installed_env_args(client).await?;
    let on: Vec<&str> = args
        .iter()
        .filter_map(|a| a.strip_prefix(FEATURE_GATES_FLAG))
        .flat_map(|g| g.split(','))
        .collect();
    let missing: Vec<&str> = gates
        .iter()
        .map(|g| g.name())
        .filter(|name| !on.contains(&format!("{name}=true").as_str()))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::Mode(format!(
        "the manager does not run with {missing:?} on: gated tests run in hack/test.sh's gated \
         phase (kruise-e2e-gates on); a gate missing there belongs in GATED_PHASE \
         (e2e/src/manager.rs)"
    )))
}

/// The installed arguments with `added` after them; `--feature-gates=` values join the installed
/// one (the manager takes the flag once), later settings of a gate winning.
fn merged_args(installed: &[String], added: &[String]) -> Vec<String> {
    let mut args = installed.to_vec();
    for a in added {
        let existing = args
            .iter_mut()
            .find(|i| i.starts_with(FEATURE_GATES_FLAG) && a.starts_with(FEATURE_GATES_FLAG));
        match (existing, a.strip_prefix(FEATURE_GATES_FLAG)) {
            (Some(i), Some(gates)) => {
                i.push(',');
                i.push_str(gates);
            }
            _ => args.push(a.clone()),
        }
    }
    args
}

/// The manager as it was before [`reconfigure`]; restoring it (explicitly, or on drop when a test
/// fails half-way) puts that configuration back and waits until it leads again.
pub struct Reconfigured {
    /// In cluster: the manager container's `env` and `args` as installed.
    original: Option<(Value, Value)>,
    restored: bool,
}

/// Runs the manager with `config` added to its installed configuration and returns once the
/// reconfigured manager holds the lease and its webhook is ready.
pub async fn reconfigure(client: &Client, config: &ManagerConfig) -> Result<Reconfigured> {
    match mode::mode() {
        Mode::Dev => {
            if !config.args.is_empty() {
                return Err(Error::Mode(
                    "dev mode reconfigures the manager through its environment only".into(),
                ));
            }
            dev_restart(&config.env)?;
            Ok(Reconfigured {
                original: None,
                restored: false,
            })
        }
        Mode::InCluster => {
            let deployments: Api<Deployment> = Api::namespaced(client.clone(), KRUISE_NS);
            let current = serde_json::to_value(deployments.get(MANAGER_DEPLOYMENT).await?)?;
            let container = &current["spec"]["template"]["spec"]["containers"][0];
            let original = (container["env"].clone(), container["args"].clone());
            let mut env: Vec<Value> = original.0.as_array().cloned().unwrap_or_default();
            for (name, value) in &config.env {
                env.retain(|e| e["name"] != name.as_str());
                env.push(json!({"name": name, "value": value}));
            }
            let installed: Vec<String> =
                serde_json::from_value(original.1.clone()).unwrap_or_default();
            let args = merged_args(&installed, &config.args);
            roll_out(client, json!(env), json!(args)).await?;
            Ok(Reconfigured {
                original: Some(original),
                restored: false,
            })
        }
    }
}

impl Reconfigured {
    /// Puts the installed configuration back and waits until that manager leads again.
    pub async fn restore(mut self, client: &Client) -> Result<()> {
        self.restored = true;
        match self.original.take() {
            None => dev_restart(&[]),
            Some((env, args)) => roll_out(client, env, args).await,
        }
    }
}

impl Drop for Reconfigured {
    fn drop(&mut self) {
        if self.restored {
            return;
        }
        let original = self.original.take();
        // A failing test unwinds through here.
        let restored = crate::on_own_runtime(move || async move {
            match original {
                None => dev_restart(&[]),
                Some((env, args)) => roll_out(&crate::client().await?, env, args).await,
            }
        });
        match restored {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("restoring the manager's configuration failed: {e}"),
            Err(_) => eprintln!("restoring the manager's configuration panicked"),
        }
    }
}

/// Sets the manager container's `env` and `args` and waits for the rollout: every replica from
/// the new template, Ready, and one of them holding the lease.
async fn roll_out(client: &Client, env: Value, args: Value) -> Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), KRUISE_NS);
    let patch = json!([
        {"op": "add", "path": "/spec/template/spec/containers/0/env", "value": env},
        {"op": "add", "path": "/spec/template/spec/containers/0/args", "value": args},
    ]);
    let patch: json_patch::Patch = serde_json::from_value(patch)?;
    let patched = deployments
        .patch(
            MANAGER_DEPLOYMENT,
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await?;
    let generation = patched.metadata.generation.unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), KRUISE_NS);
    wait_for("the reconfigured manager to roll out", ROLLOUT, || async {
        let d = deployments.get(MANAGER_DEPLOYMENT).await?;
        let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let s = d.status.unwrap_or_default();
        let done = s.observed_generation.unwrap_or_default() >= generation
            && s.updated_replicas.unwrap_or_default() == want
            && s.ready_replicas.unwrap_or_default() == want
            && s.replicas.unwrap_or_default() == want;
        // Old Pods still terminating would serve the webhook with the old configuration.
        let live = pods
            .list(&ListParams::default().labels(MANAGER_POD_SELECTOR))
            .await?
            .items;
        let settled =
            live.len() == usize::try_from(want).unwrap_or(0) && live.iter().all(pod_ready);
        Ok((done && settled).then_some(()))
    })
    .await?;
    wait_for("a reconfigured manager to lead", ROLLOUT, || async {
        let leader = mode::manager_leader_pod(client).await.ok();
        let Some(leader) = leader else {
            return Ok(None);
        };
        let live = pods
            .list(&ListParams::default().labels(MANAGER_POD_SELECTOR))
            .await?
            .items;
        Ok(live.iter().any(|p| p.name_any() == leader).then_some(()))
    })
    .await
}

/// Restarts the dev-mode manager with `env` added to what `hack/dev-up.sh` gives it.
fn dev_restart(env: &[(String, String)]) -> Result<()> {
    if let Some(pid) = mode::dev_pid("kruise-manager") {
        // SIGTERM: the manager releases its lease, so the next one leads at once.
        Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline && mode::alive(pid) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let mut cmd = Command::new(repo_root().join("hack/dev-up.sh"));
    cmd.current_dir(repo_root()).env("KRUISE_SKIP_BUILD", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(Error::Mode(format!(
            "hack/dev-up.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// The leading manager's log: dev mode's log file, or in cluster the leader Pod's container log.
pub async fn leader_log(client: &Client) -> Result<String> {
    match mode::mode() {
        Mode::Dev => Ok(String::from_utf8_lossy(&std::fs::read(
            repo_root().join(".cluster/logs/kruise-manager.log"),
        )?)
        .into_owned()),
        Mode::InCluster => {
            let leader = mode::manager_leader_pod(client).await?;
            let pods: Api<Pod> = Api::namespaced(client.clone(), KRUISE_NS);
            Ok(pods.logs(&leader, &LogParams::default()).await?)
        }
    }
}

/// One line of the manager's log, in either of its formats: the time it was written and
/// whether it says `message` with the field `key` equal to `value`. Text lines read
/// `<time> LEVEL span{key=value …}: … message …`; JSON lines (`--log-json`, as installed) carry
/// `timestamp`, `fields.message` and the span fields.
pub fn log_line_matches(line: &str, message: &str, key: &str, value: &str) -> Option<Timestamp> {
    let line = strip_ansi(line);
    if let Ok(v) = serde_json::from_str::<Value>(&line) {
        let said = v["fields"]["message"].as_str().unwrap_or_default();
        let has_field = |o: &Value| o.get(key).and_then(Value::as_str) == Some(value);
        let in_spans = v["spans"]
            .as_array()
            .is_some_and(|spans| spans.iter().any(has_field));
        let field = has_field(&v["span"]) || has_field(&v["fields"]) || in_spans;
        return (said.contains(message) && field)
            .then(|| v["timestamp"].as_str()?.parse().ok())
            .flatten();
    }
    let needle = format!("{key}={value}");
    let field = line
        .split(|c: char| c.is_whitespace() || c == '{' || c == '}' || c == ':')
        .any(|w| w == needle);
    (line.contains(message) && field)
        .then(|| line.split_whitespace().next()?.parse().ok())
        .flatten()
}

/// The line without terminal colour sequences (a dev-mode log may carry them).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ parameters final-letter
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The sum over the installed manager's replicas (each serves the webhook, so each counts what
/// it refused) of the `/metrics` samples of `metric` whose labels contain `labels` (e.g.
/// `kind_namespace_name="CloneSet_ns_web"`), read through the API server's Pod proxy. In cluster
/// only: a dev-mode manager serves its metrics on the host.
pub async fn metric_sum(client: &Client, metric: &str, labels: &str) -> Result<f64> {
    Ok(metric_samples(client, metric, labels).await?.iter().sum())
}

/// Every `/metrics` sample of `metric` whose labels contain `labels`, over the installed
/// manager's replicas (see [`metric_sum`]); empty when no replica exports such a series.
pub async fn metric_samples(client: &Client, metric: &str, labels: &str) -> Result<Vec<f64>> {
    if mode::mode() == Mode::Dev {
        return Err(Error::Mode(
            "metric_samples reads the installed manager's Pods".into(),
        ));
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), KRUISE_NS);
    let mut out = Vec::new();
    for pod in pods
        .list(&ListParams::default().labels(MANAGER_POD_SELECTOR))
        .await?
    {
        let path = format!(
            "/api/v1/namespaces/{KRUISE_NS}/pods/{}:{METRICS_PORT}/proxy/metrics",
            pod.name_any()
        );
        let req = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| Error::Mode(e.to_string()))?;
        let text = client.request_text(req).await?;
        out.extend(
            text.lines()
                .filter(|l| l.starts_with(&format!("{metric}{{")) && l.contains(labels))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()),
        );
    }
    Ok(out)
}

/// The installed manager's metrics port (deploy/manager/manager.yaml, `--metrics-addr`).
const METRICS_PORT: u16 = 8080;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_gates_join_the_installed_flag() {
        let installed = vec!["--log-json".to_owned(), "--feature-gates=A=true".to_owned()];
        assert_eq!(
            merged_args(&installed, &["--feature-gates=B=true".into(), "--x".into()]),
            vec!["--log-json", "--feature-gates=A=true,B=true", "--x"]
        );
        assert_eq!(
            merged_args(&["--log-json".into()], &["--feature-gates=B=false".into()]),
            vec!["--log-json", "--feature-gates=B=false"]
        );
    }

    #[test]
    fn gated_phase_off_takes_out_only_what_on_added() {
        let installed = vec!["--log-json".to_owned(), "--feature-gates=A=true".to_owned()];
        let on = merged_args(
            &installed,
            &[format!("{FEATURE_GATES_FLAG}{}", gated_phase_value())],
        );
        assert_ne!(on, installed);
        assert_eq!(without_gated_phase(&on), installed);
        assert_eq!(without_gated_phase(&installed), installed);
    }

    #[test]
    fn text_and_json_lines_match_the_same_way() {
        let text = "2026-12-02T10:00:01.5Z  INFO reconcile{cloneset=ns-1/web}: kruise_manager: \
                    creating pods count=2";
        let at = log_line_matches(text, "creating pods", "cloneset", "ns-1/web");
        assert_eq!(at, Some("2026-12-02T10:00:01.5Z".parse().expect("time")));
        assert_eq!(
            log_line_matches(text, "creating pods", "cloneset", "ns-1/we"),
            None
        );
        assert_eq!(
            log_line_matches(text, "deleting pods", "cloneset", "ns-1/web"),
            None
        );
        let coloured = format!("\u{1b}[2m{text}\u{1b}[0m");
        assert!(log_line_matches(&coloured, "creating pods", "cloneset", "ns-1/web").is_some());

        let json = r#"{"timestamp":"2026-12-02T10:00:02Z","level":"INFO","fields":{"message":"creating pods","count":2},"span":{"cloneset":"ns-1/web","name":"reconcile"},"spans":[{"cloneset":"ns-1/web","name":"reconcile"}]}"#;
        assert_eq!(
            log_line_matches(json, "creating pods", "cloneset", "ns-1/web"),
            Some("2026-12-02T10:00:02Z".parse().expect("time"))
        );
        assert_eq!(
            log_line_matches(json, "creating pods", "cloneset", "ns-2/web"),
            None
        );
    }
}
