//! Jobs with sidecars for the SidecarTerminator tests: built from JSON (upstream's env names), read
//! as a user reads them (the Job's conditions and counts, the Pod's phase and container states).

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};
use kruise_api::keys;
use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};

use crate::{Result, container_status, image, wait_for};

/// The sidecar: our idler image, which exits 0 at once on SIGTERM.
pub fn idler(env: &[(&str, &str)]) -> Value {
    json!({"name": "sidecar", "image": image("sidecar", "v1"), "env": env_list(env)})
}

/// A sidecar that never exits by itself and ignores SIGTERM (a `sleep` as PID 1), so only a
/// SIGKILL ends it, with a non-zero exit code.
pub fn stubborn(env: &[(&str, &str)]) -> Value {
    json!({"name": "sidecar", "image": image("sidecar", "v1"), "env": env_list(env),
           "command": ["/bin/sh", "-c", "exec sleep 100000"]})
}

fn env_list(env: &[(&str, &str)]) -> Vec<Value> {
    env.iter()
        .map(|(k, v)| json!({"name": k, "value": v}))
        .collect()
}

/// `KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true`.
pub const TERMINATE: (&str, &str) = (keys::ENV_TERMINATE_SIDECAR_WHEN_JOB_EXIT, "true");
/// `KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE=true`.
pub const IGNORE_EXIT_CODE: (&str, &str) = (keys::ENV_TERMINATE_SIDECAR_IGNORE_EXIT_CODE, "true");

/// A Job (no retries) whose Pod runs `main_script` in container `main` beside `sidecar`. The
/// grace period is short so a sidecar that ignores SIGTERM is killed soon.
pub fn job(name: &str, restart_policy: &str, main_script: &str, sidecar: Value) -> Result<Job> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": restart_policy,
                "terminationGracePeriodSeconds": 2,
                "containers": [
                    {"name": "main", "image": image("sidecar", "v1"),
                     "command": ["/bin/sh", "-c", main_script]},
                    sidecar,
                ]
            }}
        }
    }))?)
}

/// The type of the Job's finished condition (`Complete` or `Failed`) once it has one, and the Job.
pub async fn wait_finished(api: &Api<Job>, name: &str, timeout: Duration) -> Result<(String, Job)> {
    wait_for(&format!("Job {name} to finish"), timeout, || async {
        let job = api.get(name).await?;
        let done = job
            .status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
            .map(|c| c.type_.clone());
        Ok(done.map(|t| (t, job)))
    })
    .await
}

/// The one Pod of Job `name` (by the Job controller's `job-name` label).
pub async fn pod(pods: &Api<Pod>, name: &str) -> Result<Pod> {
    let lp = ListParams::default().labels(&format!("job-name={name}"));
    let list = pods.list(&lp).await?.items;
    assert_eq!(list.len(), 1, "Job {name} should have made one Pod");
    Ok(list.into_iter().next().expect("one pod"))
}

/// The terminated state of container `name`, or a panic naming what it is instead.
pub fn terminated<'a>(pod: &'a Pod, name: &str) -> &'a ContainerStateTerminated {
    let st = container_status(pod, name);
    st.and_then(|s| s.state.as_ref()?.terminated.as_ref())
        .unwrap_or_else(|| panic!("container {name} not terminated: {st:?}"))
}

/// The container's restart count.
pub fn restarts(pod: &Pod, name: &str) -> i32 {
    container_status(pod, name).map_or(-1, |s| s.restart_count)
}

/// The Pod's phase.
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Messages of the Events with `reason` about Pod `name`.
pub async fn pod_events(
    client: &kube::Client,
    ns: &str,
    name: &str,
    reason: &str,
) -> Result<Vec<String>> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    Ok(api
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("Pod") && e.reason.as_deref() == Some(reason)
        })
        .filter_map(|e| e.message)
        .collect())
}
