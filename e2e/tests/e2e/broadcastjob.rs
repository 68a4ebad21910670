//! BroadcastJob on the real kubelet, installed from `deploy/`: a job runs one Pod per eligible
//! node to completion (status, conditions, Events, Pods bound through node affinity and
//! labelled as upstream) and is deleted with its Pods once its TTL passes; FailFast fails the
//! job after a failing Pod; Pause stops new Pods and deleting the failed Pod resumes the job;
//! `spec.paused` holds the job until it is cleared; restartLimit counts an OnFailure Pod's
//! restarts; the webhook defaults as upstream and refuses bad input naming the field.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_e2e::broadcastjob::{
    self, eligible_nodes, event_notes, phase, status_i64, wait_event, wait_phase,
};
use kruise_e2e::{TestNamespace, client, container_status, wait_for};
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

/// Long enough for a Pod of a cached image to start and end on a loaded 2-core node.
const RUN: Duration = Duration::from_secs(60);

#[tokio::test]
async fn runs_to_completion_with_status_events_and_ttl_deletion() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-bcj-complete")
        .await
        .expect("ns");
    let api = broadcastjob::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let nodes = eligible_nodes(&client).await.expect("nodes");
    assert!(!nodes.is_empty(), "no eligible node");
    let job = broadcastjob::new(
        "warm",
        "echo done",
        "Never",
        json!({"completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 5}}),
    )
    .expect("job");
    let created = api
        .create(&PostParams::default(), &job)
        .await
        .expect("create");
    let uid = created.uid().expect("uid");
    let done = wait_phase(&api, "warm", "completed", RUN)
        .await
        .expect("completed");
    let n = i64::try_from(nodes.len()).expect("count");
    assert_eq!(status_i64(&done, "desired"), n, "{:?}", done.data["status"]);
    assert_eq!(status_i64(&done, "succeeded"), n);
    assert_eq!(
        (status_i64(&done, "active"), status_i64(&done, "failed")),
        (0, 0)
    );
    let st = &done.data["status"];
    assert!(
        st["startTime"].is_string() && st["completionTime"].is_string(),
        "{st}"
    );
    assert_eq!(st["conditions"][0]["type"], "Complete");
    assert_eq!(st["conditions"][0]["status"], "True");
    assert_eq!(
        st["conditions"][0]["message"],
        format!("Job completed, {n} pods succeeded, 0 pods failed")
    );

    let list = broadcastjob::pods(&pods, "warm").await.expect("pods");
    assert_eq!(list.len(), nodes.len(), "one Pod per eligible node");
    let mut on: Vec<String> = Vec::new();
    for p in &list {
        let labels = p.labels();
        assert_eq!(
            labels
                .get(keys::BROADCASTJOB_NAME_LABEL)
                .map(String::as_str),
            Some("warm")
        );
        assert_eq!(
            labels.get(keys::BROADCASTJOB_CONTROLLER_UID_LABEL),
            Some(&uid)
        );
        let owner = &p.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("BroadcastJob", uid.as_str(), Some(true))
        );
        let spec = serde_json::to_value(p.spec.as_ref()).expect("spec");
        let node = spec["nodeName"].as_str().unwrap_or_default().to_owned();
        assert_eq!(
            spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
            json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]),
            "bound by the scheduler through node affinity"
        );
        assert_eq!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded")
        );
        on.push(node);
    }
    on.sort();
    let mut want = nodes.clone();
    want.sort();
    assert_eq!(on, want, "every eligible node ran the Pod");

    let created_notes = event_notes(&client, &ns.name, "warm", keys::REASON_SUCCESSFUL_CREATE)
        .await
        .expect("events");
    for p in &list {
        let note = format!("Created pod: {}", p.name_any());
        assert!(created_notes.contains(&note), "{note} in {created_notes:?}");
    }
    let complete = wait_event(
        &client,
        &ns.name,
        "warm",
        keys::BROADCASTJOB_REASON_JOB_COMPLETE,
        RUN,
    )
    .await
    .expect("JobComplete");
    assert_eq!(
        complete[0],
        format!(
            "Job {}/warm is completed, {n} pods succeeded, 0 pods failed",
            ns.name
        )
    );

    // ttlSecondsAfterFinished: the job goes 5 s after completion, its Pods with it.
    wait_for(
        "the job deleted by its TTL",
        Duration::from_secs(30),
        || async { Ok(api.get_opt("warm").await?.is_none().then_some(())) },
    )
    .await
    .expect("TTL deletion");
    let uids: Vec<String> = list.iter().filter_map(|p| p.uid()).collect();
    wait_for(
        "the job's Pods garbage-collected",
        Duration::from_secs(30),
        || async {
            let left = broadcastjob::pods(&pods, "warm").await?;
            Ok(left
                .iter()
                .all(|p| !uids.contains(&p.uid().unwrap_or_default()))
                .then_some(()))
        },
    )
    .await
    .expect("Pods gone");
    ns.delete().await.expect("cleanup");
}

#[tokio::test]
async fn failfast_fails_the_job_after_a_failing_pod() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-bcj-failfast")
        .await
        .expect("ns");
    let api = broadcastjob::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let job = broadcastjob::new("fails", "exit 3", "Never", json!({})).expect("job");
    api.create(&PostParams::default(), &job)
        .await
        .expect("create");
    let failed = wait_phase(&api, "fails", "failed", RUN)
        .await
        .expect("failed");
    assert_eq!(
        failed.data["spec"]["failurePolicy"]["type"], "FailFast",
        "defaulted"
    );
    assert!(
        status_i64(&failed, "failed") >= 1,
        "{:?}",
        failed.data["status"]
    );
    assert_eq!(status_i64(&failed, "active"), 0);
    let c = &failed.data["status"]["conditions"][0];
    assert_eq!(
        (c["type"].as_str(), c["status"].as_str()),
        (Some("Failed"), Some("True"))
    );
    assert_eq!(c["message"], keys::BROADCASTJOB_MESSAGE_FAILED_POD);
    let notes = wait_event(
        &client,
        &ns.name,
        "fails",
        keys::BROADCASTJOB_REASON_FAILED_POD,
        RUN,
    )
    .await
    .expect("failure Event");
    assert!(
        notes[0].starts_with(keys::BROADCASTJOB_MESSAGE_FAILED_POD),
        "{notes:?}"
    );
    let list = broadcastjob::pods(&pods, "fails").await.expect("pods");
    let failed_pod = list
        .iter()
        .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
        .expect("a Failed Pod");
    let exit = container_status(failed_pod, "job")
        .and_then(|c| c.state.as_ref()?.terminated.as_ref().map(|t| t.exit_code));
    assert_eq!(exit, Some(3));
    // A failed job creates nothing more.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = broadcastjob::pods(&pods, "fails").await.expect("pods");
    assert_eq!(
        after.iter().map(|p| p.uid()).collect::<Vec<_>>(),
        list.iter().map(|p| p.uid()).collect::<Vec<_>>()
    );
    assert_eq!(phase(&api.get("fails").await.expect("job")), "failed");
    ns.delete().await.expect("cleanup");
}

#[tokio::test]
async fn pause_policy_stops_new_pods_until_the_failed_pod_goes() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-bcj-pause")
        .await
        .expect("ns");
    let api = broadcastjob::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let job = broadcastjob::new(
        "pauses",
        "exit 1",
        "Never",
        json!({"failurePolicy": {"type": "Pause"}}),
    )
    .expect("job");
    api.create(&PostParams::default(), &job)
        .await
        .expect("create");
    let paused = wait_phase(&api, "pauses", "paused", RUN)
        .await
        .expect("paused");
    assert!(status_i64(&paused, "failed") >= 1);
    wait_event(
        &client,
        &ns.name,
        "pauses",
        keys::BROADCASTJOB_REASON_PAUSED,
        RUN,
    )
    .await
    .expect("Paused Event");
    let first = broadcastjob::pods(&pods, "pauses").await.expect("pods");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let still = broadcastjob::pods(&pods, "pauses").await.expect("pods");
    assert_eq!(
        still.iter().map(|p| p.uid()).collect::<Vec<_>>(),
        first.iter().map(|p| p.uid()).collect::<Vec<_>>(),
        "no new Pod while paused"
    );
    assert_eq!(phase(&api.get("pauses").await.expect("job")), "paused");
    assert_eq!(
        event_notes(
            &client,
            &ns.name,
            "pauses",
            keys::BROADCASTJOB_REASON_PAUSED
        )
        .await
        .expect("events")
        .len(),
        1,
        "paused once, not once per reconcile"
    );
    // The failed Pod deleted: the job continues with a new Pod.
    for p in &first {
        pods.delete(&p.name_any(), &DeleteParams::default())
            .await
            .expect("delete failed Pod");
    }
    wait_event(
        &client,
        &ns.name,
        "pauses",
        keys::BROADCASTJOB_REASON_CONTINUE,
        RUN,
    )
    .await
    .expect("Continue Event");
    let old: Vec<Option<String>> = first.iter().map(|p| p.uid()).collect();
    wait_for("a new Pod after resuming", RUN, || async {
        let now = broadcastjob::pods(&pods, "pauses").await?;
        Ok(now.iter().any(|p| !old.contains(&p.uid())).then_some(()))
    })
    .await
    .expect("new Pod");
    ns.delete().await.expect("cleanup");
}

#[tokio::test]
async fn paused_spec_holds_the_job_until_cleared() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-bcj-paused")
        .await
        .expect("ns");
    let api = broadcastjob::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let job = broadcastjob::new("held", "true", "Never", json!({"paused": true})).expect("job");
    api.create(&PostParams::default(), &job)
        .await
        .expect("create");
    let held = wait_phase(&api, "held", "paused", RUN)
        .await
        .expect("paused");
    assert!(status_i64(&held, "desired") >= 1);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        broadcastjob::pods(&pods, "held")
            .await
            .expect("pods")
            .is_empty(),
        "no Pod while paused"
    );
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"paused": false}})),
    )
    .await
    .expect("resume");
    let done = wait_phase(&api, "held", "completed", RUN)
        .await
        .expect("completed after resuming");
    assert_eq!(status_i64(&done, "succeeded"), status_i64(&done, "desired"));
    assert!(
        !event_notes(
            &client,
            &ns.name,
            "held",
            keys::BROADCASTJOB_REASON_CONTINUE
        )
        .await
        .expect("events")
        .is_empty()
    );
    ns.delete().await.expect("cleanup");
}

#[tokio::test]
async fn restart_limit_counts_on_failure_restarts() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-bcj-restarts")
        .await
        .expect("ns");
    let api = broadcastjob::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    // OnFailure: the kubelet restarts the container; the first restart passes restartLimit 0.
    let job = broadcastjob::new(
        "crashes",
        "sleep 1; exit 1",
        "OnFailure",
        json!({"failurePolicy": {"type": "FailFast", "restartLimit": 0}}),
    )
    .expect("job");
    api.create(&PostParams::default(), &job)
        .await
        .expect("create");
    let failed = wait_phase(&api, "crashes", "failed", RUN)
        .await
        .expect("failed once restarted");
    assert_eq!(
        status_i64(&failed, "failed"),
        1,
        "{:?}",
        failed.data["status"]
    );
    let list = broadcastjob::pods(&pods, "crashes").await.expect("pods");
    assert_eq!(list.len(), 1);
    let p = &list[0];
    let restarts = container_status(p, "job").map_or(0, |c| c.restart_count);
    assert!(restarts >= 1, "failed only after a restart: {restarts}");
    // Counted failed by its restarts, not by its phase (an OnFailure Pod is never Failed).
    assert_ne!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Failed")
    );
    ns.delete().await.expect("cleanup");
}

#[tokio::test]
async fn webhook_defaults_and_refuses_bad_input_naming_the_field() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-bcj-webhook")
        .await
        .expect("ns");
    let api = broadcastjob::api(&client, &ns.name);
    let cases = [
        (
            json!({"template": {"spec": {"restartPolicy": "Always"}}}),
            "spec.template.spec.restartPolicy: Invalid value: \"Always\": pod restartPolicy can only be Never or OnFailure",
        ),
        (
            json!({"parallelism": -1}),
            "spec.parallelism: Invalid value: -1",
        ),
        (
            json!({"completionPolicy": {"type": "Never", "ttlSecondsAfterFinished": 10}}),
            "spec.completionPolicy.ttlSecondsAfterFinished: Invalid value: 10: ttlSecondsAfterFinished can just work with Always CompletionPolicyType",
        ),
        (
            json!({"template": {"metadata": {"labels": {"broadcastjob-name": "x"}}}}),
            "spec.template.metadata.labels: Invalid value",
        ),
        (
            json!({"failurePolicy": {"restartLimit": -1}}),
            "spec.failurePolicy.restartLimit: Invalid value: -1",
        ),
    ];
    for (i, (spec, want)) in cases.into_iter().enumerate() {
        let mut job =
            broadcastjob::new(&format!("bad-{i}"), "true", "Never", json!({})).expect("job");
        merge(&mut job.data["spec"], &spec);
        let err = api
            .create(&PostParams::default(), &job)
            .await
            .expect_err(&format!("{spec} must be refused"));
        let msg = err.to_string();
        assert!(msg.contains(want), "{spec}: {msg}");
    }
    // Defaults as upstream, and v1alpha1 served with the same JSON (conversion None).
    let alpha = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &ns.name,
        &broadcastjob::resource(keys::VERSION_V1ALPHA1),
    );
    let mut job =
        broadcastjob::new("alpha", "true", "Never", json!({"paused": true})).expect("job");
    job.types = Some(kube::api::TypeMeta {
        api_version: keys::APPS_V1ALPHA1.to_owned(),
        kind: "BroadcastJob".to_owned(),
    });
    let made = alpha
        .create(&PostParams::default(), &job)
        .await
        .expect("v1alpha1 create");
    assert_eq!(made.data["spec"]["completionPolicy"]["type"], "Always");
    assert_eq!(made.data["spec"]["failurePolicy"]["type"], "FailFast");
    assert_eq!(made.data["spec"]["parallelism"], 2_147_483_647);
    let beta = api.get("alpha").await.expect("read as v1beta1");
    assert_eq!(beta.data["spec"], made.data["spec"]);
    ns.delete().await.expect("cleanup");
}

fn merge(base: &mut serde_json::Value, extra: &serde_json::Value) {
    match (base, extra) {
        (serde_json::Value::Object(b), serde_json::Value::Object(e)) => {
            for (k, v) in e {
                merge(b.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
        (b, e) => *b = e.clone(),
    }
}

#[tokio::test]
async fn cli_creates_waits_pauses_and_resumes_with_exit_codes() {
    use kruise_e2e::plugin::{CLI_LIMIT, Fixture, assert_code, assert_stdout};
    let fx = Fixture::new("e2e-bcj-cli").await;
    let n = eligible_nodes(&fx.client).await.expect("nodes").len();
    let img = kruise_e2e::image("sidecar", "v1");
    let kk = |args: Vec<&str>| {
        let kk = fx.kk.clone();
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        async move {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            kk.run_for(&a, CLI_LIMIT).await.expect("run kubectl-kruise")
        }
    };
    // Completed: exit 0 with upstream's completion message.
    let run = kk(vec![
        "create",
        "broadcastjob",
        "ok",
        "--image",
        &img,
        "--wait",
        "--timeout",
        "2m",
        "--",
        "/bin/sh",
        "-c",
        "true",
    ])
    .await;
    assert_code(&run, 0);
    assert_stdout(&run, "broadcastjob/ok created");
    assert_stdout(
        &run,
        &format!("broadcastjob/ok completed: Job completed, {n} pods succeeded, 0 pods failed"),
    );
    // Failed (FailFast, the default): exit 1 naming why.
    let run = kk(vec![
        "create",
        "bcj",
        "bad",
        "--image",
        &img,
        "--wait",
        "--timeout",
        "2m",
        "--",
        "/bin/sh",
        "-c",
        "exit 2",
    ])
    .await;
    assert_code(&run, 1);
    assert!(
        run.stderr
            .contains("broadcastjob/bad failed: failure policy is FailurePolicyTypeFailFast"),
        "{run}"
    );
    // The job is a `rollout status` target too (`bcj/NAME`): 0 completed, 1 failed.
    let run = kk(vec!["rollout", "status", "bcj/ok", "--timeout", "1m"]).await;
    assert_code(&run, 0);
    assert_stdout(&run, "job completed: Job completed");
    assert_code(
        &kk(vec![
            "rollout",
            "status",
            "broadcastjob/bad",
            "--timeout",
            "1m",
        ])
        .await,
        1,
    );
    // Paused: exit 3 until resumed, then 0.
    let run = kk(vec![
        "create", "bcj", "held", "--image", &img, "--paused", "--", "/bin/sh", "-c", "true",
    ])
    .await;
    assert_code(&run, 0);
    let run = kk(vec!["broadcastjob", "wait", "held", "--timeout", "1m"]).await;
    assert_code(&run, 3);
    assert!(run.stderr.contains("broadcastjob/held is paused"), "{run}");
    assert_code(&kk(vec!["bcj", "resume", "held"]).await, 0);
    let run = kk(vec!["bcj", "wait", "held", "--timeout", "1m"]).await;
    assert_code(&run, 0);
    assert_stdout(&run, "broadcastjob/held completed");
    assert_code(&kk(vec!["bcj", "pause", "held"]).await, 0);
    let api = broadcastjob::api(&fx.client, &fx.ns.name);
    assert_eq!(
        api.get("held").await.expect("job").data["spec"]["paused"],
        true
    );
    // Timed out: exit 4; missing: exit 6.
    let run = kk(vec![
        "create",
        "bcj",
        "slow",
        "--image",
        &img,
        "--wait",
        "--timeout",
        "2s",
        "--",
        "/bin/sh",
        "-c",
        "sleep 30",
    ])
    .await;
    assert_code(&run, 4);
    assert_code(&kk(vec!["bcj", "wait", "missing"]).await, 6);
    fx.ns.delete().await.expect("cleanup");
}

/// The leading manager killed while the job's Pods run: the standby takes over from the Pods it
/// lists, creates none twice, and the job completes with the Pods it had.
#[tokio::test]
async fn serial_a_manager_kill_mid_job_doubles_no_pod() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-bcj-restart")
        .await
        .expect("ns");
    let api = broadcastjob::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let n = eligible_nodes(&client).await.expect("nodes").len();
    let job = broadcastjob::new("long", "sleep 12", "Never", json!({})).expect("job");
    api.create(&PostParams::default(), &job)
        .await
        .expect("create");
    let before = wait_for("a running Pod per node", RUN, || async {
        let list = broadcastjob::pods(&pods, "long").await?;
        let running = list
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        Ok((running == n).then_some(list))
    })
    .await
    .expect("running Pods");
    kruise_e2e::mode::kill_manager(&client, async || {})
        .await
        .expect("kill the leading manager");
    let done = wait_phase(&api, "long", "completed", Duration::from_secs(120))
        .await
        .expect("completed after the restart");
    let after = broadcastjob::pods(&pods, "long").await.expect("pods");
    assert_eq!(
        after.iter().map(|p| p.uid()).collect::<Vec<_>>(),
        before.iter().map(|p| p.uid()).collect::<Vec<_>>(),
        "the same Pods, none created twice"
    );
    let n = i64::try_from(n).expect("n");
    assert_eq!(
        (status_i64(&done, "succeeded"), status_i64(&done, "desired")),
        (n, n)
    );
    ns.delete().await.expect("cleanup");
}
