//! `recreate-container`: restart containers of a Pod in place through a ContainerRecreateRequest,
//! and the helpers `rollout restart` reuses.

use crate::cli::{CreateCrrArgs, RecreateArgs};
use crate::ctx::Ctx;
use crate::error::{CliError, Result, exit, kube_err};
use crate::watch::Cache;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use std::time::Duration;

/// Where a CRR stands, read from its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrrState {
    pub phase: String,
    pub message: String,
    /// (container, phase) in request order.
    pub containers: Vec<(String, String)>,
}

impl CrrState {
    pub fn from_json(obj: &Value) -> Self {
        let status = obj.get("status").cloned().unwrap_or(Value::Null);
        let containers = status
            .get("containerRecreateStates")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|c| {
                        (
                            c["name"].as_str().unwrap_or_default().to_string(),
                            c["phase"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        CrrState {
            phase: status["phase"].as_str().unwrap_or("Pending").to_string(),
            message: status["message"].as_str().unwrap_or_default().to_string(),
            containers,
        }
    }

    /// Some(Ok) when every container was recreated, Some(Err) on failure, None while running.
    pub fn verdict(&self) -> Option<std::result::Result<(), String>> {
        let failed: Vec<&str> = self
            .containers
            .iter()
            .filter(|(_, p)| p == "Failed")
            .map(|(n, _)| n.as_str())
            .collect();
        // Completed only says the request is over: the manager also completes requests the
        // daemon never picked up, or whose pod went away. Success is every container Succeeded.
        let all_recreated =
            !self.containers.is_empty() && self.containers.iter().all(|(_, p)| p == "Succeeded");
        match self.phase.as_str() {
            "Failed" => Some(Err(self.failure_text(&failed))),
            "Succeeded" | "Completed" if all_recreated => Some(Ok(())),
            "Succeeded" | "Completed" => Some(Err(self.failure_text(&failed))),
            _ => None,
        }
    }

    fn failure_text(&self, failed: &[&str]) -> String {
        let which = if failed.is_empty() {
            String::new()
        } else {
            format!(" (containers {})", failed.join(","))
        };
        let msg = if self.message.is_empty() {
            "no container was recreated".to_string()
        } else {
            self.message.clone()
        };
        format!("{msg}{which}")
    }

    pub fn line(&self) -> String {
        let parts: Vec<String> = self
            .containers
            .iter()
            .map(|(n, p)| format!("{n}={p}"))
            .collect();
        let mut line = format!("{} {}", self.phase, parts.join(" "))
            .trim_end()
            .to_string();
        if !self.message.is_empty() {
            line.push_str(&format!(" ({})", self.message));
        }
        line
    }
}

pub fn crr_body(pod: &str, containers: &[String], ordered: bool, api_version: &str) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": "ContainerRecreateRequest",
        "metadata": {"generateName": format!("{pod}-")},
        "spec": {
            "podName": pod,
            "containers": containers.iter().map(|c| json!({"name": c})).collect::<Vec<_>>(),
            "strategy": {"orderedRecreate": ordered, "failurePolicy": "Fail"},
            // Finished requests clean themselves up instead of piling up.
            "ttlSecondsAfterFinished": 600,
        }
    })
}

/// `create crr`'s object: a name the user chose and kruise-tools' defaults (failurePolicy Fail,
/// unready grace 3 s, minStartedSeconds 3, a 300 s deadline, deleted 1800 s after it finishes).
pub fn named_body(args: &CreateCrrArgs, containers: &[String], api_version: &str) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": "ContainerRecreateRequest",
        "metadata": {"name": args.name},
        "spec": {
            "podName": args.pod,
            "containers": containers.iter().map(|c| json!({"name": c})).collect::<Vec<_>>(),
            "strategy": {
                "failurePolicy": "Fail",
                "orderedRecreate": args.ordered,
                "unreadyGracePeriodSeconds": args.unready_grace_period_seconds,
                "minStartedSeconds": args.min_started_seconds,
            },
            "activeDeadlineSeconds": 300,
            "ttlSecondsAfterFinished": 1800,
        }
    })
}

pub struct CrrClient {
    pub api: Api<DynamicObject>,
    pub api_version: String,
}

impl CrrClient {
    pub async fn new(ctx: &Ctx, namespace: &str) -> Result<Self> {
        let (api, ar) = ctx
            .kruise_api("containerrecreaterequests", Some(namespace))
            .await?;
        Ok(CrrClient {
            api,
            api_version: ar.api_version,
        })
    }

    /// Creates a CRR for the pod (every container when `containers` is empty); returns its name.
    pub async fn create(&self, pod: &Pod, containers: &[String], ordered: bool) -> Result<String> {
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let chosen = chosen_containers(pod, containers)?;
        self.post(crr_body(&pod_name, &chosen, ordered, &self.api_version))
            .await
    }

    async fn post(&self, body: Value) -> Result<String> {
        let obj: DynamicObject =
            serde_json::from_value(body).map_err(|e| CliError::Other(e.into()))?;
        let created = self
            .api
            .create(&PostParams::default(), &obj)
            .await
            .map_err(kube_err)?;
        let name = created.metadata.name.unwrap_or_default();
        tracing::info!(crr = %name, "created ContainerRecreateRequest");
        Ok(name)
    }

    /// Watches the named CRRs until each has a verdict; calls `on_change` on every state change.
    pub async fn wait_all(
        &self,
        names: &[String],
        timeout: Duration,
        mut on_change: impl FnMut(&str, &CrrState),
    ) -> Result<Vec<(String, std::result::Result<(), String>)>> {
        let mut stream = watcher(self.api.clone(), watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut cache: Cache<DynamicObject> = Cache::default();
        let mut last: std::collections::BTreeMap<String, CrrState> = Default::default();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let next = tokio::time::timeout_at(deadline, stream.next())
                .await
                .map_err(|_| {
                    // A request nobody picked up has no phase: point at the node agent.
                    let untouched = names
                        .iter()
                        .all(|n| last.get(n).is_none_or(|st| st.phase == "Pending" && st.containers.is_empty()));
                    let hint = if untouched {
                        " (still Pending: is kruise-daemon running on the pod's node, and the manager labelling CRRs?)"
                    } else {
                        ""
                    };
                    CliError::Timeout(format!(
                        "ContainerRecreateRequests {} not finished after {}s{hint}",
                        names.join(","),
                        timeout.as_secs()
                    ))
                })?;
            match next {
                None => return Err(CliError::Api("the watch ended unexpectedly".into())),
                Some(Err(e)) if crate::watch::expired(&e) => continue,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "CRR watch error, retrying");
                    continue;
                }
                Some(Ok(ev)) => {
                    cache.apply(ev);
                }
            }
            let mut done = Vec::new();
            for name in names {
                let Some(obj) = cache
                    .items
                    .get(name)
                    .and_then(|o| serde_json::to_value(o).ok())
                else {
                    continue;
                };
                let state = CrrState::from_json(&obj);
                if last.get(name) != Some(&state) {
                    on_change(name, &state);
                    last.insert(name.clone(), state.clone());
                }
                if let Some(v) = state.verdict() {
                    done.push((name.clone(), v));
                }
            }
            if done.len() == names.len() {
                return Ok(done);
            }
        }
    }
}

/// The containers to recreate: those named (each must exist), or every container of the Pod.
fn chosen_containers(pod: &Pod, containers: &[String]) -> Result<Vec<String>> {
    let all: Vec<String> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    if let Some(bad) = containers.iter().find(|c| !all.contains(c)) {
        return Err(CliError::Usage(format!(
            "pod {} has no container {bad:?} (it has {})",
            pod.metadata.name.as_deref().unwrap_or_default(),
            all.join(", ")
        )));
    }
    Ok(if containers.is_empty() {
        all
    } else {
        containers.to_vec()
    })
}

async fn get_pod(ctx: &Ctx, name: &str) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    pods.get(name)
        .await
        .map_err(|e| CliError::from_kube(e, Some(("Pod", name, &ctx.namespace))))
}

/// `create crr NAME --pod P`: kruise-tools' command; `--wait` follows it as `recreate-container`.
pub async fn create(ctx: &Ctx, args: &CreateCrrArgs) -> Result<i32> {
    let pod = get_pod(ctx, &args.pod).await?;
    let chosen = chosen_containers(&pod, &args.containers)?;
    let crr = CrrClient::new(ctx, &ctx.namespace).await?;
    let body = named_body(args, &chosen, &crr.api_version);
    if args.dry_run {
        let text = serde_saphyr::to_string(&body).map_err(|e| CliError::Other(e.into()))?;
        print!("{text}");
        return Ok(exit::OK);
    }
    let name = crr.post(body).await?;
    println!("containerrecreaterequest/{name} created");
    if !args.wait {
        return Ok(exit::OK);
    }
    follow(&crr, &name, &args.pod, args.timeout).await
}

async fn follow(crr: &CrrClient, name: &str, pod: &str, timeout: Duration) -> Result<i32> {
    let results = crr
        .wait_all(&[name.to_string()], timeout, |n, s| {
            println!("{n}: {}", s.line())
        })
        .await?;
    match results.into_iter().next() {
        Some((_, Ok(()))) => {
            println!("containers of pod {pod} recreated");
            Ok(exit::OK)
        }
        Some((_, Err(e))) => Err(CliError::Failed(format!(
            "containerrecreaterequest/{name}: {e}"
        ))),
        None => Err(CliError::Api("no result".into())),
    }
}

pub async fn run(ctx: &Ctx, args: &RecreateArgs) -> Result<i32> {
    let pod = get_pod(ctx, &args.pod).await?;
    let crr = CrrClient::new(ctx, &ctx.namespace).await?;
    let name = crr.create(&pod, &args.containers, args.ordered).await?;
    println!(
        "containerrecreaterequest/{name} created for pod {}",
        args.pod
    );
    if !args.wait {
        return Ok(exit::OK);
    }
    follow(&crr, &name, &args.pod, args.timeout).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        let st = |phase: &str, cs: Value| {
            CrrState::from_json(&json!({"status": {"phase": phase, "containerRecreateStates": cs}}))
        };
        assert_eq!(
            st("Recreating", json!([{"name": "a", "phase": "Recreating"}])).verdict(),
            None
        );
        assert_eq!(
            st("Completed", json!([{"name": "a", "phase": "Succeeded"}])).verdict(),
            Some(Ok(()))
        );
        assert!(
            matches!(st("Completed", json!([{"name": "a", "phase": "Failed"}])).verdict(), Some(Err(e)) if e.contains("containers a"))
        );
        assert!(
            st("Failed", json!([]))
                .verdict()
                .is_some_and(|v| v.is_err())
        );
        assert_eq!(CrrState::from_json(&json!({})).verdict(), None);
        // Completed by the manager because no daemon answered: nothing was recreated.
        let unanswered = CrrState::from_json(&json!({"status": {"phase": "Completed",
            "message": "daemon has not responded for a long time"}}));
        assert!(
            matches!(unanswered.verdict(), Some(Err(e)) if e.contains("daemon has not responded"))
        );
        assert_eq!(
            unanswered.line(),
            "Completed (daemon has not responded for a long time)"
        );
        assert!(
            matches!(st("Completed", json!([])).verdict(), Some(Err(e)) if e == "no container was recreated")
        );
    }

    #[test]
    fn body_shape() {
        let b = crr_body(
            "web-abc",
            &["app".into(), "sidecar".into()],
            true,
            "apps.kruise.io/v1alpha1",
        );
        assert_eq!(b["spec"]["podName"], "web-abc");
        assert_eq!(
            b["spec"]["containers"],
            json!([{"name": "app"}, {"name": "sidecar"}])
        );
        assert_eq!(b["spec"]["strategy"]["orderedRecreate"], true);
        assert_eq!(b["metadata"]["generateName"], "web-abc-");
    }

    #[test]
    fn create_crr_takes_kruise_tools_spellings_and_defaults() {
        use crate::cli::{Cli, Command, CreateCmd};
        use clap::Parser;
        let parse = |line: &str| match Cli::try_parse_from(line.split_whitespace())
            .expect("parses")
            .command
        {
            Command::Create(CreateCmd::Crr(a)) => a,
            other => panic!("not create crr: {other:?}"),
        };
        let a = parse(
            "kubectl-kruise create ContainerRecreateRequest my-crr --pod=pod-1 --containers=app,log --unreadyGracePeriodSeconds=5",
        );
        assert_eq!(a.name, "my-crr");
        assert_eq!(a.containers, vec!["app", "log"]);
        assert_eq!(a.unready_grace_period_seconds, 5);
        assert_eq!(a.min_started_seconds, 3);
        let b = named_body(&a, &a.containers, "apps.kruise.io/v1beta1");
        assert_eq!(b["metadata"]["name"], "my-crr");
        assert_eq!(b["spec"]["podName"], "pod-1");
        assert_eq!(
            b["spec"]["strategy"],
            json!({"failurePolicy": "Fail", "orderedRecreate": false,
                "unreadyGracePeriodSeconds": 5, "minStartedSeconds": 3})
        );
        assert_eq!(b["spec"]["activeDeadlineSeconds"], 300);
        assert_eq!(b["spec"]["ttlSecondsAfterFinished"], 1800);
        let c = parse("kubectl-kruise create crr x -p pod-2 -m 0 --wait");
        assert!(c.wait && c.containers.is_empty());
        assert_eq!(c.min_started_seconds, 0);
    }
}
