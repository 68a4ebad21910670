//! EphemeralJob on the real kubelet, installed from `deploy/`: the job injects its container
//! (marked with its UID) into the selected running Pods only, oldest first up to `replicas`,
//! one at a time under `parallelism: 1`, counts them in upstream's status fields, and is
//! deleted once its TTL passes; a failing container fails the job, and so does the deadline; a
//! Pod whose own container has the template's name is left out with an Event; `paused` holds
//! the job until the plugin resumes it; the webhook defaults the container's policies and
//! refuses bad input naming the field.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::ephemeraljob::reasons;
use kruise_api::keys;
use kruise_e2e::ephemeraljob::{self, events, running_pod, status_i64, wait_phase};
use kruise_e2e::{TestNamespace, client, wait_for};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::json;

/// Long enough for three short containers to run one after the other on a loaded 2-core node.
const RUN: Duration = Duration::from_secs(60);

fn injected(pod: &Pod) -> Vec<serde_json::Value> {
    pod.spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref())
        .map(|cs| {
            cs.iter()
                .map(|c| serde_json::to_value(c).unwrap_or_default())
                .collect()
        })
        .unwrap_or_default()
}

fn terminated(pod: &Pod) -> Option<serde_json::Value> {
    let st = pod.status.as_ref()?.ephemeral_container_statuses.as_ref()?;
    let s = st.iter().find(|s| s.name == "dbg")?;
    serde_json::to_value(s.state.as_ref()?.terminated.as_ref()?).ok()
}

#[tokio::test]
async fn injects_the_selected_pods_one_at_a_time_and_expires() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ejob")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    // Created in name order, so oldest first is a, b, c, d.
    for name in ["a", "b", "c", "d"] {
        running_pod(&pods, name, "ej", "main").await.expect("pod");
    }
    running_pod(&pods, "other", "other", "main")
        .await
        .expect("pod");
    let api = ephemeraljob::api(&client, &ns.name);
    let job = ephemeraljob::new(
        "probe",
        "ej",
        "sleep 2",
        json!({"replicas": 3, "parallelism": 1, "ttlSecondsAfterFinished": 3}),
    )
    .expect("job");
    let created = api
        .create(&PostParams::default(), &job)
        .await
        .expect("create");
    let uid = created.uid().expect("uid");
    let c = &created.data["spec"]["template"]["ephemeralContainers"][0];
    assert_eq!(
        (
            c["imagePullPolicy"].as_str(),
            c["terminationMessagePolicy"].as_str()
        ),
        (Some("IfNotPresent"), Some("File")),
        "defaulted by the webhook"
    );

    let done = wait_phase(&api, "probe", "Succeeded", RUN)
        .await
        .expect("Succeeded");
    let st = &done.data["status"];
    assert_eq!(
        ["match", "succeeded", "failed", "running", "waiting"].map(|f| status_i64(&done, f)),
        [3, 3, 0, 0, 0],
        "{st}"
    );
    assert!(
        st["startTime"].is_string() && st["completionTime"].is_string(),
        "{st}"
    );
    let cond = st["conditions"].as_array().cloned().unwrap_or_default();
    assert!(
        cond.iter()
            .any(|c| c["type"] == "JobSucceeded" && c["status"] == "True"),
        "{st}"
    );
    assert!(
        done.finalizers()
            .iter()
            .any(|f| f == keys::EPHEMERALJOB_FINALIZER),
        "held while the job lives"
    );

    // Injected into the three oldest selected Pods, marked with the job's UID; not into the
    // fourth (replicas) nor the unselected one.
    let mut runs = Vec::new();
    for name in ["a", "b", "c"] {
        let p = pods.get(name).await.expect("pod");
        let eph = injected(&p);
        assert_eq!(eph.len(), 1, "{name}: {eph:?}");
        assert_eq!(eph[0]["name"], "dbg");
        assert!(
            eph[0]["env"].as_array().is_some_and(
                |e| e.contains(&json!({"name": keys::EPHEMERALJOB_ID_ENV, "value": uid}))
            ),
            "{name}: {eph:?}"
        );
        let t = terminated(&p).expect("terminated");
        assert_eq!(t["exitCode"], 0, "{name}: {t}");
        let at = |k: &str| {
            t[k].as_str()
                .unwrap_or_default()
                .parse::<jiff::Timestamp>()
                .expect("time")
        };
        runs.push((at("startedAt"), at("finishedAt"), name));
    }
    for name in ["d", "other"] {
        let p = pods.get(name).await.expect("pod");
        assert!(injected(&p).is_empty(), "{name} was injected");
    }
    // parallelism 1: no container started before the previous one had finished.
    runs.sort();
    for w in runs.windows(2) {
        assert!(w[1].0 >= w[0].1, "overlapping runs: {runs:?}");
    }
    let notes = events(&client, &ns.name, "probe", reasons::INJECTED)
        .await
        .expect("events");
    let mut related: Vec<&str> = notes.iter().map(|(_, r)| r.as_str()).collect();
    related.sort();
    assert_eq!(related, ["a", "b", "c"], "{notes:?}");

    // ttlSecondsAfterFinished: the job goes 3 s after completion, its finalizer released.
    wait_for(
        "the job deleted by its TTL",
        Duration::from_secs(30),
        || async { Ok(api.get_opt("probe").await?.is_none().then_some(())) },
    )
    .await
    .expect("TTL deletion");
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn a_failing_container_fails_the_job_and_a_name_conflict_is_reported() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ejob-fail")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    running_pod(&pods, "ok", "ej", "main").await.expect("pod");
    // Its own container is named like the job's: the API server would refuse the injection.
    running_pod(&pods, "taken", "ej", "dbg").await.expect("pod");
    let api = ephemeraljob::api(&client, &ns.name);
    let job = ephemeraljob::new("crash", "ej", "exit 3", json!({"parallelism": 2})).expect("job");
    api.create(&PostParams::default(), &job)
        .await
        .expect("create");

    let done = wait_phase(&api, "crash", "Failed", RUN)
        .await
        .expect("Failed");
    assert_eq!(
        ["match", "succeeded", "failed", "running", "waiting"].map(|f| status_i64(&done, f)),
        [1, 0, 1, 0, 0],
        "{}",
        done.data["status"]
    );
    let cond = done.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let failed = cond
        .iter()
        .find(|c| c["type"] == "JobFailed")
        .expect("JobFailed");
    assert_eq!(failed["reason"], reasons::CREATE_FAILED);
    assert_eq!(
        failed["message"],
        format!(
            "EphemeralJob {}/crash failed to create ephemeral container",
            ns.name
        )
    );
    let ok = pods.get("ok").await.expect("pod");
    assert_eq!(terminated(&ok).expect("terminated")["exitCode"], 3);
    let taken = pods.get("taken").await.expect("pod");
    assert!(
        injected(&taken).is_empty(),
        "the conflicting Pod was left alone"
    );
    let conflicts = wait_for(
        "the name-conflict Event",
        Duration::from_secs(10),
        || async {
            let e = events(&client, &ns.name, "crash", reasons::NAME_CONFLICT).await?;
            Ok((!e.is_empty()).then_some(e))
        },
    )
    .await
    .expect("Event");
    assert_eq!(conflicts[0].1, "taken", "{conflicts:?}");
    assert!(
        conflicts[0].0.contains("\"dbg\" in containers"),
        "{conflicts:?}"
    );
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_field() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ejob-bad")
        .await
        .expect("ns");
    let api = ephemeraljob::api(&client, &ns.name);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let cases = [
        (
            json!({"parallelism": -1}),
            "spec.parallelism: Invalid value: -1",
        ),
        (
            json!({"selector": {}}),
            "spec.selector: Invalid value: {}: empty selector is invalid",
        ),
        (
            json!({"activeDeadlineSeconds": 0}),
            "spec.activeDeadlineSeconds: Invalid value: 0",
        ),
        (
            json!({"template": {"ephemeralContainers": [{"name": "dbg", "image": "busybox",
                "ports": [{"containerPort": 80}]}]}}),
            "spec.template.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container",
        ),
    ];
    for (spec, want) in cases {
        let job = ephemeraljob::new("bad", "ej", "true", spec.clone()).expect("job");
        let err = api.create(&dry, &job).await.expect_err("refused");
        let msg = err.to_string();
        assert!(msg.contains(want), "{spec}: {msg}");
    }
    ns.delete().await.expect("delete ns");
}

/// `spec.paused` holds the job (phase Paused, nothing injected) until `kubectl kruise ejob
/// resume`; `ejob pause` sets it again.
#[tokio::test]
async fn paused_injects_nothing_until_resumed_with_the_plugin() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ejob-pause")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    running_pod(&pods, "p", "ej", "main").await.expect("pod");
    let api = ephemeraljob::api(&client, &ns.name);
    let job = ephemeraljob::new("hold", "ej", "true", json!({"paused": true})).expect("job");
    api.create(&PostParams::default(), &job)
        .await
        .expect("create");
    let held = wait_phase(&api, "hold", "Paused", RUN)
        .await
        .expect("Paused");
    assert_eq!(status_i64(&held, "match"), 1);
    assert!(
        injected(&pods.get("p").await.expect("pod")).is_empty(),
        "paused, yet injected"
    );

    let kk = kruise_e2e::cli::Kruise::new(&ns.name).expect("plugin");
    let run = kk.run(&["ejob", "resume", "hold"]).await.expect("run");
    assert_eq!(run.code, Some(0), "{run}");
    wait_phase(&api, "hold", "Succeeded", RUN)
        .await
        .expect("Succeeded");
    assert_eq!(injected(&pods.get("p").await.expect("pod")).len(), 1);
    let run = kk
        .run(&["ephemeraljob", "pause", "hold"])
        .await
        .expect("run");
    assert_eq!(run.code, Some(0), "{run}");
    let paused = api.get("hold").await.expect("get").data["spec"]["paused"].clone();
    assert_eq!(paused, json!(true));
    ns.delete().await.expect("delete ns");
}

/// `activeDeadlineSeconds` fails a job whose container still runs (it cannot be stopped from
/// outside, so it runs on).
#[tokio::test]
async fn the_deadline_fails_a_job_still_running() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ejob-deadline")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    running_pod(&pods, "p", "ej", "main").await.expect("pod");
    let api = ephemeraljob::api(&client, &ns.name);
    let job = ephemeraljob::new(
        "slow",
        "ej",
        "sleep 600",
        json!({"activeDeadlineSeconds": 3}),
    )
    .expect("job");
    api.create(&PostParams::default(), &job)
        .await
        .expect("create");
    let done = wait_phase(&api, "slow", "Failed", RUN)
        .await
        .expect("Failed");
    let st = &done.data["status"];
    assert!(st["completionTime"].is_string(), "{st}");
    let cond = st["conditions"].as_array().cloned().unwrap_or_default();
    let failed = cond
        .iter()
        .find(|c| c["type"] == "JobFailed")
        .expect("JobFailed");
    assert_eq!(failed["reason"], reasons::DEADLINE_EXCEEDED, "{st}");
    assert_eq!(
        failed["message"],
        format!(
            "EphemeralJob {}/slow was active longer than specified deadline",
            ns.name
        )
    );
    assert_eq!(status_i64(&done, "succeeded"), 0, "{st}");
    assert_eq!(injected(&pods.get("p").await.expect("pod")).len(), 1);
    ns.delete().await.expect("delete ns");
}
