//! `exec`: run a command in a container, as `kubectl exec` does, where `-S SIDECAR` enters the
//! container of a SidecarSet hot-upgrade pair that serves now (kruise-tools' `exec -S`), and
//! `TYPE/NAME` picks a Pod of a workload.

use crate::cli::ExecArgs;
use crate::ctx::{Ctx, Workload};
use crate::error::{CliError, Result, kube_err};
use crate::target::Target;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::{keys, pod as podutil, sidecarset};
use kube::api::{Api, AttachParams, AttachedProcess, ListParams, TerminalSize};
use kube::{Resource, ResourceExt};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Which container to enter, and what to say about the choice on stderr.
#[derive(Debug, PartialEq, Eq)]
pub struct Choice {
    pub container: String,
    pub note: Option<String>,
}

/// The container `exec` enters: `-S` names a hot-upgrade sidecar and resolves to its working
/// container (or to a plain container of that name: a cold sidecar); `-c` names it; neither
/// takes the first container, as kubectl does.
pub fn choose(pod: &Pod, container: Option<&str>, sidecar: Option<&str>) -> Result<Choice> {
    let names: Vec<&str> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.iter().map(|c| c.name.as_str()).collect())
        .unwrap_or_default();
    let pod_name = pod.name_any();
    if let Some(sidecar) = sidecar {
        let working = pod
            .annotations()
            .get(keys::SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION)
            .map(|v| sidecarset::parse_working_containers(v))
            .transpose()
            .map_err(|e| CliError::Failed(format!("pod {pod_name}: {e}")))?
            .unwrap_or_default();
        if let Some(c) = working.get(sidecar) {
            return Ok(Choice {
                container: c.clone(),
                note: Some(format!("Enter working container {c} of SidecarSet.")),
            });
        }
        if names.contains(&sidecar) {
            return Ok(Choice {
                container: sidecar.to_string(),
                note: None,
            });
        }
        let pairs: Vec<&String> = working.keys().collect();
        return Err(CliError::Usage(format!(
            "-S {sidecar}: pod {pod_name} has no hot-upgrade sidecar {sidecar:?} (hot-upgrade sidecars: {pairs:?}; containers: {names:?})"
        )));
    }
    match container {
        Some(c) if names.contains(&c) => Ok(Choice {
            container: c.to_string(),
            note: None,
        }),
        Some(c) => Err(CliError::Usage(format!(
            "-c {c}: pod {pod_name} has no container {c:?} (containers: {names:?})"
        ))),
        None => {
            let first = names
                .first()
                .ok_or_else(|| CliError::Failed(format!("pod {pod_name} has no containers")))?;
            Ok(Choice {
                container: first.to_string(),
                note: (names.len() > 1).then(|| format!("Defaulting container name to {first}.")),
            })
        }
    }
}

/// The Pod a `TYPE/NAME` stands for: a running Pod of the workload, ready ones first, then by
/// name, so the same one is picked each time.
pub fn pick(mut pods: Vec<Pod>) -> Option<Pod> {
    pods.retain(|p| phase(p) == "Running" && p.meta().deletion_timestamp.is_none());
    pods.sort_by_key(|p| (!podutil::is_ready(p), p.name_any()));
    pods.into_iter().next()
}

async fn find_pod(ctx: &Ctx, what: &str) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let Some((kind, name)) = what.split_once('/') else {
        return pods
            .get(what)
            .await
            .map_err(|e| CliError::from_kube(e, Some(("pod", what, &ctx.namespace))));
    };
    if matches!(kind, "pod" | "pods" | "po") {
        return pods
            .get(name)
            .await
            .map_err(|e| CliError::from_kube(e, Some(("pod", name, &ctx.namespace))));
    }
    let target: Target = what
        .parse()
        .map_err(|e: crate::target::TargetError| CliError::Usage(e.to_string()))?;
    let workload = Workload::locate(ctx, &target).await?;
    let view = workload.view().await?;
    let selector = view.list_selector()?;
    let list = workload
        .pods_api(&ctx.client)
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(kube_err)?;
    pick(list.items)
        .ok_or_else(|| CliError::Failed(format!("{target} has no running Pod to exec into")))
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Unknown")
}

/// The remote command's exit code from the status the API server sends at its end.
pub fn exit_code(status: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Status) -> i32 {
    if status.status.as_deref() == Some("Success") {
        return 0;
    }
    status
        .details
        .as_ref()
        .and_then(|d| d.causes.as_ref())
        .and_then(|causes| {
            causes
                .iter()
                .find(|c| c.reason.as_deref() == Some("ExitCode"))
                .and_then(|c| c.message.as_deref())
                .and_then(|m| m.parse().ok())
        })
        .unwrap_or(crate::error::exit::FAILED)
}

pub async fn run(ctx: &Ctx, args: &ExecArgs) -> Result<i32> {
    if args.command.is_empty() {
        return Err(CliError::Usage(
            "you must give a command to run after --, for example: kubectl kruise exec POD -S proxy -- sh".into(),
        ));
    }
    let pod = find_pod(ctx, &args.pod).await?;
    let phase = phase(&pod);
    if matches!(phase, "Succeeded" | "Failed") {
        return Err(CliError::Failed(format!(
            "cannot exec into a container in a completed pod; current phase is {phase}"
        )));
    }
    let choice = choose(&pod, args.container.as_deref(), args.sidecar.as_deref())?;
    if let Some(note) = &choice.note {
        eprintln!("{note}");
    }
    let tty = args.tty && args.stdin && std::io::IsTerminal::is_terminal(&std::io::stdin());
    // As kubectl: without -i there is no input to be a terminal, so -t is dropped silently.
    if args.tty && args.stdin && !tty {
        eprintln!("Unable to use a TTY - input is not a terminal or the right kind of file");
    }
    let params = AttachParams::default()
        .container(choice.container.clone())
        .stdin(args.stdin)
        .stdout(true)
        .stderr(!tty)
        .tty(tty);
    let pods: Api<Pod> = Api::namespaced(
        ctx.client.clone(),
        &pod.namespace().unwrap_or_else(|| ctx.namespace.clone()),
    );
    let process = pods
        .exec(&pod.name_any(), args.command.clone(), &params)
        .await
        .map_err(|e| CliError::from_kube(e, Some(("pod", &pod.name_any(), &ctx.namespace))))?;
    let _raw = if tty { RawMode::enter() } else { None };
    stream(process, args.stdin, tty).await
}

/// Restores the terminal when the command ends, however it ends.
struct RawMode;

impl RawMode {
    fn enter() -> Option<Self> {
        ratatui::crossterm::terminal::enable_raw_mode()
            .ok()
            .map(|_| RawMode)
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = ratatui::crossterm::terminal::disable_raw_mode();
    }
}

async fn stream(mut process: AttachedProcess, stdin: bool, tty: bool) -> Result<i32> {
    let status = process.take_status();
    let mut tasks = Vec::new();
    if let Some(mut out) = process.stdout() {
        tasks.push(tokio::spawn(async move {
            let mut local = tokio::io::stdout();
            let _ = tokio::io::copy(&mut out, &mut local).await;
            let _ = local.flush().await;
        }));
    }
    if let Some(mut err) = process.stderr() {
        tasks.push(tokio::spawn(async move {
            let mut local = tokio::io::stderr();
            let _ = tokio::io::copy(&mut err, &mut local).await;
            let _ = local.flush().await;
        }));
    }
    // Stdin is not awaited: the command may end before its input does.
    let input = stdin.then(|| process.stdin()).flatten().map(|mut remote| {
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut tokio::io::stdin(), &mut remote).await;
            // End of input closes the remote stdin, so `cat` and shells see EOF.
            let _ = remote.shutdown().await;
        })
    });
    let resize = tty
        .then(|| process.terminal_size())
        .flatten()
        .map(|mut sizes| {
            tokio::spawn(async move {
                use futures::SinkExt;
                let mut last = None;
                loop {
                    if let Ok(size) = ratatui::crossterm::terminal::size()
                        && last != Some(size)
                    {
                        last = Some(size);
                        let (width, height) = size;
                        if sizes.send(TerminalSize { width, height }).await.is_err() {
                            return;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            })
        });
    let status = match status {
        Some(status) => status.await,
        None => None,
    };
    for t in tasks {
        let _ = t.await;
    }
    for t in [input, resize].into_iter().flatten() {
        t.abort();
    }
    let _ = process.join().await;
    Ok(status.map(|s| exit_code(&s)).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, phase: &str, ready: bool, working: Option<&str>) -> Pod {
        let mut annotations = serde_json::Map::new();
        if let Some(w) = working {
            annotations.insert(
                keys::SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION.into(),
                json!(w),
            );
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"containers": [
                {"name": "app"}, {"name": "proxy-1"}, {"name": "proxy-2"}, {"name": "log"}
            ]},
            "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": if ready { "True" } else { "False" }}
            ]}
        }))
        .expect("pod")
    }

    #[test]
    fn sidecar_resolves_to_the_working_container_of_its_pair() {
        let p = pod("a", "Running", true, Some(r#"{"proxy":"proxy-2"}"#));
        let c = choose(&p, None, Some("proxy")).expect("chosen");
        assert_eq!(c.container, "proxy-2");
        assert_eq!(
            c.note.as_deref(),
            Some("Enter working container proxy-2 of SidecarSet.")
        );
        // -S wins over -c, as kruise-tools.
        assert_eq!(
            choose(&p, Some("app"), Some("proxy"))
                .expect("chosen")
                .container,
            "proxy-2"
        );
        // A cold sidecar: its own container.
        assert_eq!(
            choose(&p, None, Some("log")).expect("chosen").container,
            "log"
        );
        let err = choose(&p, None, Some("mesh")).expect_err("unknown sidecar");
        assert!(err.to_string().contains("-S mesh"), "{err}");
        assert!(err.to_string().contains("\"proxy\""), "{err}");
    }

    #[test]
    fn container_defaults_to_the_first_as_kubectl() {
        let p = pod("a", "Running", true, None);
        let c = choose(&p, None, None).expect("chosen");
        assert_eq!(c.container, "app");
        assert_eq!(c.note.as_deref(), Some("Defaulting container name to app."));
        assert_eq!(
            choose(&p, Some("log"), None).expect("chosen").container,
            "log"
        );
        let err = choose(&p, Some("nope"), None).expect_err("unknown container");
        assert_eq!(err.exit_code(), crate::error::exit::USAGE);
        // A bad annotation is reported, not read as "no pair".
        let bad = pod("b", "Running", true, Some("{not json"));
        assert!(choose(&bad, None, Some("proxy")).is_err());
    }

    #[test]
    fn a_workload_execs_into_a_running_ready_pod_by_name() {
        let picked = pick(vec![
            pod("c", "Running", true, None),
            pod("a", "Pending", false, None),
            pod("b", "Running", false, None),
            pod("d", "Running", true, None),
        ])
        .expect("a pod");
        assert_eq!(picked.name_any(), "c");
        assert!(pick(vec![pod("a", "Succeeded", false, None)]).is_none());
    }

    #[test]
    fn exit_code_comes_from_the_status_cause() {
        let status = |v| serde_json::from_value(v).expect("status");
        assert_eq!(exit_code(&status(json!({"status": "Success"}))), 0);
        assert_eq!(
            exit_code(&status(
                json!({"status": "Failure", "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}})
            )),
            3
        );
        assert_eq!(
            exit_code(&status(json!({"status": "Failure", "message": "boom"}))),
            1
        );
    }
}
