//! `create broadcastjob`, `broadcastjob wait|pause|resume`: a BroadcastJob made from flags, and
//! followed until it ends with an exit code a script can branch on (0 completed, 1 failed,
//! 3 paused, 4 timed out).

use std::time::Duration;

use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::cli::{CreateBroadcastJobArgs, FailurePolicy, RestartPolicy};
use crate::ctx::Ctx;
use crate::error::{CliError, Result, exit, kube_err};

const PLURAL: &str = "broadcastjobs";
/// How often `wait` reads the job.
const POLL: Duration = Duration::from_secs(1);

/// The BroadcastJob the flags describe.
pub fn job_body(
    args: &CreateBroadcastJobArgs,
    api_version: &str,
) -> std::result::Result<Value, String> {
    let mut selector = serde_json::Map::new();
    for kv in &args.node_selector {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--node-selector {kv:?} is not KEY=VALUE"))?;
        selector.insert(k.to_string(), Value::from(v));
    }
    let mut container = json!({"name": "job", "image": args.image});
    if !args.command.is_empty() {
        container["command"] = json!(args.command);
    }
    let mut pod = json!({
        "containers": [container],
        "restartPolicy": match args.restart_policy {
            RestartPolicy::Never => "Never",
            RestartPolicy::OnFailure => "OnFailure",
        },
    });
    if !selector.is_empty() {
        pod["nodeSelector"] = Value::Object(selector);
    }
    let mut completion = json!({"type": if args.never_complete { "Never" } else { "Always" }});
    if let Some(ttl) = args.ttl {
        completion["ttlSecondsAfterFinished"] = json!(ttl.as_secs());
    }
    if let Some(d) = args.active_deadline {
        completion["activeDeadlineSeconds"] = json!(d.as_secs());
    }
    let mut failure = json!({"type": match args.failure_policy {
        FailurePolicy::Continue => "Continue",
        FailurePolicy::FailFast => "FailFast",
        FailurePolicy::Pause => "Pause",
    }});
    if let Some(l) = args.restart_limit {
        failure["restartLimit"] = json!(l);
    }
    let mut spec = json!({
        "template": {"spec": pod},
        "completionPolicy": completion,
        "failurePolicy": failure,
    });
    if let Some(p) = &args.parallelism {
        spec["parallelism"] = match p {
            crate::math::IntOrPercent::Int(n) => json!(n),
            crate::math::IntOrPercent::Percent(_) => json!(p.to_string()),
        };
    }
    if args.paused {
        spec["paused"] = json!(true);
    }
    Ok(json!({
        "apiVersion": api_version,
        "kind": "BroadcastJob",
        "metadata": {"name": args.name},
        "spec": spec,
    }))
}

/// One line of progress: the counts and the phase.
pub fn progress(job: &Value) -> String {
    let st = &job["status"];
    let n = |k: &str| st[k].as_i64().unwrap_or(0);
    format!(
        "desired {}, active {}, succeeded {}, failed {} ({})",
        n("desired"),
        n("active"),
        n("succeeded"),
        n("failed"),
        st["phase"]
            .as_str()
            .filter(|p| !p.is_empty())
            .unwrap_or("pending")
    )
}

/// Whether the job has ended, and how: `Some(Ok)` completed, `Some(Err)` failed or paused.
pub fn verdict(name: &str, job: &Value) -> Option<std::result::Result<String, CliError>> {
    let st = &job["status"];
    let message = st["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().rev().find_map(|c| c["message"].as_str()))
        .unwrap_or_default();
    match st["phase"].as_str()? {
        "completed" => Some(Ok(format!("broadcastjob/{name} completed: {message}"))),
        "failed" => Some(Err(CliError::Failed(format!(
            "broadcastjob/{name} failed: {message}"
        )))),
        // Right after a resume the phase still says paused until the controller has looked.
        "paused" if held(job) => Some(Err(CliError::Paused(format!(
            "broadcastjob/{name} is paused ({}); resume it with `kubectl kruise broadcastjob resume {name}`",
            progress(job)
        )))),
        _ => None,
    }
}

/// Whether the job is held: `spec.paused`, or failurePolicy Pause with a failed Pod.
pub fn held(job: &Value) -> bool {
    job["spec"]["paused"].as_bool().unwrap_or(false)
        || (job["spec"]["failurePolicy"]["type"].as_str() == Some("Pause")
            && job["status"]["failed"].as_i64().unwrap_or(0) > 0)
}

pub async fn create(ctx: &Ctx, args: &CreateBroadcastJobArgs) -> Result<i32> {
    let (jobs, ar) = ctx.kruise_api(PLURAL, Some(&ctx.namespace)).await?;
    let body = job_body(args, &ar.api_version).map_err(CliError::Usage)?;
    let obj: DynamicObject = serde_json::from_value(body).map_err(|e| CliError::Other(e.into()))?;
    jobs.create(&PostParams::default(), &obj)
        .await
        .map_err(kube_err)?;
    println!("broadcastjob/{} created", args.name);
    if !args.wait {
        return Ok(exit::OK);
    }
    wait(ctx, &args.name, args.timeout).await
}

pub async fn wait(ctx: &Ctx, name: &str, timeout: Duration) -> Result<i32> {
    let (jobs, _) = ctx.kruise_api(PLURAL, Some(&ctx.namespace)).await?;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::new();
    loop {
        let Some(job) = jobs.get_opt(name).await.map_err(kube_err)? else {
            return Err(CliError::NotFound {
                kind: "BroadcastJob".into(),
                name: name.into(),
                namespace: ctx.namespace.clone(),
            });
        };
        let v = serde_json::to_value(&job).map_err(|e| CliError::Other(e.into()))?;
        let line = progress(&v);
        if line != last {
            println!("broadcastjob/{name}: {line}");
            last = line;
        }
        match verdict(name, &v) {
            Some(Ok(msg)) => {
                println!("{msg}");
                return Ok(exit::OK);
            }
            Some(Err(e)) => return Err(e),
            None => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(CliError::Timeout(format!(
                "broadcastjob/{name} not finished after {}s: {last}",
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

pub async fn pause(ctx: &Ctx, name: &str, paused: bool) -> Result<i32> {
    let (jobs, _) = ctx.kruise_api(PLURAL, Some(&ctx.namespace)).await?;
    jobs.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"paused": paused}})),
    )
    .await
    .map_err(kube_err)?;
    println!(
        "broadcastjob/{name} {}",
        if paused { "paused" } else { "resumed" }
    );
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    fn args(line: &str) -> CreateBroadcastJobArgs {
        let cli = Cli::try_parse_from(line.split_whitespace()).expect("parses");
        match cli.command {
            crate::cli::Command::Create(crate::cli::CreateCmd::Broadcastjob(a)) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn body_from_flags() {
        let a = args(
            "kubectl-kruise create broadcastjob warm --image busybox:1 --parallelism 30% \
             --node-selector pool=web --restart-policy on-failure --failure-policy pause \
             --restart-limit 2 --ttl 10m --active-deadline 1h --paused -- sh -c true",
        );
        let b = job_body(&a, "apps.kruise.io/v1beta1").expect("body");
        assert_eq!(b["metadata"]["name"], "warm");
        let s = &b["spec"];
        assert_eq!(s["parallelism"], "30%");
        assert_eq!(s["paused"], true);
        assert_eq!(s["template"]["spec"]["restartPolicy"], "OnFailure");
        assert_eq!(s["template"]["spec"]["nodeSelector"]["pool"], "web");
        assert_eq!(
            s["template"]["spec"]["containers"][0]["command"],
            json!(["sh", "-c", "true"])
        );
        assert_eq!(
            s["completionPolicy"],
            json!({"type": "Always", "ttlSecondsAfterFinished": 600, "activeDeadlineSeconds": 3600})
        );
        assert_eq!(
            s["failurePolicy"],
            json!({"type": "Pause", "restartLimit": 2})
        );
        let a = args("kubectl-kruise create bcj w --image i --never-complete --parallelism 2");
        let b = job_body(&a, "apps.kruise.io/v1beta1").expect("body");
        assert_eq!(b["spec"]["parallelism"], 2);
        assert_eq!(b["spec"]["completionPolicy"], json!({"type": "Never"}));
        assert_eq!(b["spec"]["failurePolicy"], json!({"type": "FailFast"}));
        assert!(
            b["spec"]["template"]["spec"]["containers"][0]
                .get("command")
                .is_none()
        );
        let mut bad = a;
        bad.node_selector = vec!["nokv".into()];
        assert!(job_body(&bad, "v").is_err());
    }

    #[test]
    fn verdicts_and_exit_codes() {
        let job = |phase: &str| {
            json!({"status": {"phase": phase, "desired": 3, "active": 1, "succeeded": 2, "failed": 0,
                "conditions": [{"type": "Complete", "status": "True", "message": "Job completed, 3 pods succeeded, 0 pods failed"}]}})
        };
        assert!(verdict("w", &job("running")).is_none());
        assert!(verdict("w", &json!({})).is_none());
        let ok = verdict("w", &job("completed")).expect("ended").expect("ok");
        assert_eq!(
            ok,
            "broadcastjob/w completed: Job completed, 3 pods succeeded, 0 pods failed"
        );
        let failed = verdict("w", &job("failed"))
            .expect("ended")
            .expect_err("failed");
        assert_eq!(failed.exit_code(), exit::FAILED);
        // A stale phase after a resume: still waiting.
        assert!(verdict("w", &job("paused")).is_none());
        let mut held = job("paused");
        held["spec"] = json!({"paused": true});
        let paused = verdict("w", &held).expect("ended").expect_err("paused");
        assert_eq!(paused.exit_code(), exit::PAUSED);
        let mut failure_paused = job("paused");
        failure_paused["spec"] = json!({"failurePolicy": {"type": "Pause"}});
        failure_paused["status"]["failed"] = json!(1);
        assert!(verdict("w", &failure_paused).is_some_and(|r| r.is_err()));
        assert_eq!(
            progress(&job("running")),
            "desired 3, active 1, succeeded 2, failed 0 (running)"
        );
    }
}
