//! `kubectl-kruise` end to end: the real binary against the real cluster, with kruise-manager,
//! its webhook and kruise-daemon running. Every run passes `--kubeconfig` and `-n` explicitly and
//! checks the documented exit code; what a command claims is checked by reading the cluster back.
//!
//! Needs the binary: `cargo build -p kubectl-kruise`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kruise_api::keys;
use kruise_e2e::cli::{Kruise, Run};
use kruise_e2e::cloneset::{
    self, patch_spec, pod_revision, set_image, status_i64, status_str, wait_rolled_out, wait_status,
};
use kruise_e2e::{TestNamespace, client, container_status, image, pod_condition, pod_ready};
use kruise_e2e::{wait_for, wait_pod};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

const ROLLOUT: Duration = Duration::from_secs(180);
/// Hard limit on one watching CLI run, above its own `--timeout`.
const CLI_LIMIT: Duration = Duration::from_secs(300);

/// Exit codes documented in cli/README.md and `kubectl-kruise --help`.
const OK: i32 = 0;
const USAGE: i32 = 2;
const PAUSED: i32 = 3;
const TIMEOUT: i32 = 4;
const PROGRESSING: i32 = 5;
const NOT_FOUND: i32 = 6;
const UNREACHABLE: i32 = 8;

/// The fields `rollout status -o json` promises (schemaVersion 1).
const STATUS_FIELDS: &[&str] = &[
    "schemaVersion",
    "kind",
    "apiVersion",
    "namespace",
    "name",
    "outcome",
    "done",
    "exitCode",
    "message",
    "generation",
    "observedGeneration",
    "replicas",
    "partition",
    "paused",
    "expectedUpdatedReplicas",
    "updatedReplicas",
    "updatedReadyReplicas",
    "readyReplicas",
    "availableReplicas",
    "currentRevision",
    "updateRevision",
    "podsUpdatingInPlace",
];

fn in_place(extra: Value) -> Value {
    let mut s =
        json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}});
    if let (Some(base), Some(extra)) = (s["rollingUpdate"].as_object_mut(), extra.as_object()) {
        base.extend(extra.clone());
    }
    s
}

struct Fixture {
    client: Client,
    ns: TestNamespace,
    api: Api<DynamicObject>,
    pods: Api<Pod>,
    kk: Kruise,
}

async fn fixture(prefix: &str) -> Fixture {
    // Before creating anything, so a missing binary leaves no namespace behind.
    kruise_e2e::cli::binary().expect("kubectl-kruise binary");
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, prefix)
        .await
        .expect("test namespace");
    let kk = Kruise::new(&ns.name).expect("kubectl-kruise binary and kubeconfig");
    Fixture {
        api: cloneset::api(&client, &ns.name),
        pods: ns.api(),
        kk,
        ns,
        client,
    }
}

impl Fixture {
    /// Creates CloneSet `name` and waits until every Pod runs it, ready.
    async fn cloneset(&self, name: &str, replicas: i32, strategy: Value) -> DynamicObject {
        let cs = cloneset::new(name, replicas, "v1", strategy).expect("CloneSet");
        self.api
            .create(&PostParams::default(), &cs)
            .await
            .expect("create CloneSet");
        wait_rolled_out(&self.api, name, replicas.into(), ROLLOUT)
            .await
            .expect("initial rollout")
    }

    async fn get(&self, name: &str) -> DynamicObject {
        self.api.get(name).await.expect("read CloneSet back")
    }

    async fn pod_list(&self, name: &str) -> Vec<Pod> {
        cloneset::pods(&self.pods, name).await.expect("list Pods")
    }
}

/// A field of the CloneSet's update strategy (v1beta1 keeps it under rollingUpdate, v1alpha1 flat).
fn strategy_field(cs: &DynamicObject, field: &str) -> Value {
    let s = &cs.data["spec"]["updateStrategy"];
    match &s["rollingUpdate"][field] {
        Value::Null => s[field].clone(),
        v => v.clone(),
    }
}

fn template_image(cs: &DynamicObject) -> String {
    cs.data["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Pod name → (UID, app containerID, app restartCount).
type Incarnations = BTreeMap<String, (String, String, i32)>;

fn incarnations(pods: &[Pod]) -> Incarnations {
    pods.iter()
        .map(|p| {
            let c = container_status(p, "app");
            (
                p.name_any(),
                (
                    p.uid().unwrap_or_default(),
                    c.and_then(|c| c.container_id.clone()).unwrap_or_default(),
                    c.map(|c| c.restart_count).unwrap_or(-1),
                ),
            )
        })
        .collect()
}

fn assert_code(run: &Run, code: i32) {
    assert_eq!(run.code, Some(code), "expected exit {code}: {run}");
}

/// Failures print exactly one line on stderr, `error: ...`.
fn assert_one_error_line(run: &Run, needle: &str) {
    let lines = run.stderr_lines();
    assert_eq!(lines.len(), 1, "one stderr line expected: {run}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(needle),
        "stderr should be `error: ...{needle}...`: {run}"
    );
}

/// Checks the schema of every `-o json` line and that only the last one is final.
fn check_status_docs(run: &Run, ns: &str, name: &str) -> Vec<Value> {
    let docs = run
        .json_lines()
        .unwrap_or_else(|e| panic!("stdout is JSON lines ({e}): {run}"));
    assert!(!docs.is_empty(), "at least one JSON line: {run}");
    for (i, d) in docs.iter().enumerate() {
        for f in STATUS_FIELDS {
            assert!(d.get(*f).is_some(), "line {i} lacks {f:?}: {d}");
        }
        assert_eq!(d["schemaVersion"], 1, "{d}");
        assert_eq!(d["kind"], "CloneSet", "{d}");
        assert!(
            d["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("apps.kruise.io/")),
            "{d}"
        );
        assert_eq!(
            (d["namespace"].as_str(), d["name"].as_str()),
            (Some(ns), Some(name))
        );
        let last = i + 1 == docs.len();
        assert_eq!(d["done"], last, "only the last line is done: {d}");
        if !last {
            assert_eq!(d["exitCode"], Value::Null, "{d}");
            assert_eq!(d["outcome"], "Progressing", "{d}");
        }
    }
    docs
}

/// `rollout status` waits through a partitioned in-place rollout (partition 50% of 4) and exits 0
/// exactly when the 2 expected Pods run the new revision, ready, with the in-place update over.
#[tokio::test]
async fn status_waits_for_partitioned_in_place_rollout() {
    let fx = fixture("e2e-cli-status").await;
    let first = fx
        .cloneset(
            "web",
            4,
            in_place(json!({"partition": "50%", "maxUnavailable": 1})),
        )
        .await;
    let before = incarnations(&fx.pod_list("web").await);

    set_image(&fx.api, "web", "v2").await.expect("set image");
    let run = fx
        .kk
        .spawn(&[
            "rollout",
            "status",
            "clone/web",
            "-o",
            "json",
            "--timeout",
            "4m",
        ])
        .expect("spawn")
        .finish(CLI_LIMIT)
        .await
        .expect("run");
    // Read the cluster as soon as the CLI says done: it must already be true.
    let cs = fx.get("web").await;
    let pods = fx.pod_list("web").await;
    assert_code(&run, OK);

    let update = status_str(&cs, "updateRevision").to_string();
    assert_ne!(
        update,
        status_str(&first, "updateRevision"),
        "a new revision"
    );
    let updated: Vec<&Pod> = pods.iter().filter(|p| pod_revision(p) == update).collect();
    assert_eq!((pods.len(), updated.len()), (4, 2), "2 of 4 Pods updated");
    for p in &updated {
        let name = p.name_any();
        assert!(pod_ready(p), "{name} is ready when status exits");
        assert_eq!(
            pod_condition(p, keys::INPLACE_UPDATE_READY),
            Some("True"),
            "{name}: in-place update finished"
        );
        assert_eq!(
            container_status(p, "app").map(|c| c.image.as_str()),
            Some(image("testapp", "v2").as_str()),
            "{name} runs v2"
        );
        assert_eq!(
            before.get(&name).map(|b| &b.0),
            p.uid().as_ref(),
            "{name} was updated in place"
        );
    }

    let docs = check_status_docs(&run, &fx.ns.name, "web");
    assert!(
        docs.len() >= 2,
        "it reported progress before the end: {run}"
    );
    let last = &docs[docs.len() - 1];
    assert_eq!(last["outcome"], "Complete", "{last}");
    assert_eq!(last["exitCode"], 0, "{last}");
    assert_eq!(last["partition"], "50%", "{last}");
    assert_eq!(last["paused"], false, "{last}");
    assert_eq!(last["replicas"], 4, "{last}");
    assert_eq!(last["expectedUpdatedReplicas"], 2, "{last}");
    assert_eq!(last["updatedReplicas"], 2, "{last}");
    assert_eq!(last["updatedReadyReplicas"], 2, "{last}");
    assert_eq!(last["podsUpdatingInPlace"], json!([]), "{last}");
    assert_eq!(last["updateRevision"], update.as_str(), "{last}");
    assert_eq!(last["generation"], last["observedGeneration"], "{last}");
    assert!(
        last["message"]
            .as_str()
            .is_some_and(|m| m.contains("2 of 4")),
        "{last}"
    );

    // Text, once: the same verdict in one line.
    let once = fx
        .kk
        .run(&["rollout", "status", "clone/web", "--watch=false"])
        .await
        .expect("run");
    assert_code(&once, OK);
    assert_eq!(
        once.stdout.trim(),
        "partitioned rollout complete: 2 of 4 pods updated (partition 50% keeps 2)",
        "{once}"
    );
    fx.ns.delete().await.expect("delete ns");
}

/// A paused rollout exits 3 (0 with --success-on-pause), a rollout that cannot finish exits 4 on
/// `--timeout 3s`, and `--watch=false` exits 5 while it is progressing.
#[tokio::test]
async fn status_exit_codes_for_paused_and_timed_out_rollouts() {
    let fx = fixture("e2e-cli-codes").await;
    fx.cloneset(
        "web",
        2,
        in_place(json!({"paused": true, "maxUnavailable": "100%"})),
    )
    .await;
    set_image(&fx.api, "web", "v2").await.expect("set image");
    wait_status(
        &fx.api,
        "web",
        "the paused revision observed",
        ROLLOUT,
        |cs| status_i64(cs, "updatedReplicas") == 0,
    )
    .await
    .expect("observed");

    let paused = fx
        .kk
        .run(&["rollout", "status", "clone/web", "--timeout", "3s"])
        .await
        .expect("run");
    assert_code(&paused, PAUSED);
    assert_one_error_line(&paused, "--success-on-pause");
    assert!(paused.stderr.contains("cloneset/web"), "{paused}");

    let paused_json = fx
        .kk
        .run(&[
            "rollout",
            "status",
            "clone/web",
            "--timeout",
            "3s",
            "-o",
            "json",
        ])
        .await
        .expect("run");
    assert_code(&paused_json, PAUSED);
    let docs = check_status_docs(&paused_json, &fx.ns.name, "web");
    let last = &docs[docs.len() - 1];
    assert_eq!(
        (&last["outcome"], &last["exitCode"], &last["paused"]),
        (&json!("Paused"), &json!(PAUSED), &json!(true)),
        "{last}"
    );

    let accepted = fx
        .kk
        .run(&[
            "rollout",
            "status",
            "clone/web",
            "--timeout",
            "3s",
            "--success-on-pause",
        ])
        .await
        .expect("run");
    assert_code(&accepted, OK);

    // Resume onto an image that does not exist: the rollout can never finish.
    let mut obj = fx.get("web").await;
    obj.data["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!(image("testapp", "does-not-exist"));
    fx.api
        .replace("web", &PostParams::default(), &obj)
        .await
        .expect("bad image");
    patch_spec(
        &fx.api,
        "web",
        json!({"updateStrategy": {"rollingUpdate": {"paused": false}}}),
    )
    .await
    .expect("resume");
    wait_status(
        &fx.api,
        "web",
        "the stuck revision observed",
        ROLLOUT,
        |cs| !strategy_field(cs, "paused").as_bool().unwrap_or(false),
    )
    .await
    .expect("observed");

    let stuck = fx
        .kk
        .run(&["rollout", "status", "clone/web", "--timeout", "3s"])
        .await
        .expect("run");
    assert_code(&stuck, TIMEOUT);
    assert_one_error_line(&stuck, "timed out after 3s");
    assert!(
        stuck.elapsed >= Duration::from_secs(3) && stuck.elapsed < Duration::from_secs(20),
        "waited about 3s: {stuck}"
    );

    let stuck_json = fx
        .kk
        .run(&[
            "rollout",
            "status",
            "clone/web",
            "--timeout",
            "3s",
            "-o",
            "json",
        ])
        .await
        .expect("run");
    assert_code(&stuck_json, TIMEOUT);
    let docs = check_status_docs(&stuck_json, &fx.ns.name, "web");
    let last = &docs[docs.len() - 1];
    assert_eq!(
        (&last["outcome"], &last["exitCode"]),
        (&json!("TimedOut"), &json!(TIMEOUT)),
        "{last}"
    );

    let once = fx
        .kk
        .run(&["rollout", "status", "clone/web", "--watch=false"])
        .await
        .expect("run");
    assert_code(&once, PROGRESSING);
    assert_one_error_line(&once, "cloneset/web");
    fx.ns.delete().await.expect("delete ns");
}

/// pause, resume, partition and promote change the CloneSet (read back) and the rollout follows.
#[tokio::test]
async fn pause_resume_partition_promote_drive_the_rollout() {
    let fx = fixture("e2e-cli-promote").await;
    fx.cloneset("web", 4, in_place(json!({"maxUnavailable": 1})))
        .await;
    let before = incarnations(&fx.pod_list("web").await);
    let kk = &fx.kk;

    let run = kk
        .run(&["rollout", "pause", "clone/web"])
        .await
        .expect("run");
    assert_code(&run, OK);
    assert_eq!(run.stdout.trim(), "cloneset/web paused", "{run}");
    assert_eq!(strategy_field(&fx.get("web").await, "paused"), true);
    let again = kk
        .run(&["rollout", "pause", "clone/web"])
        .await
        .expect("run");
    assert_code(&again, OK);
    assert!(again.stdout.contains("already paused"), "{again}");

    let run = kk
        .run(&["rollout", "partition", "clone/web", "3"])
        .await
        .expect("run");
    assert_code(&run, OK);
    assert_eq!(strategy_field(&fx.get("web").await, "partition"), 3);

    let v2 = image("testapp", "v2");
    let run = kk
        .run(&["set", "image", "clone/web", &format!("app={v2}")])
        .await
        .expect("run");
    assert_code(&run, OK);
    assert!(run.stdout.contains("IN PLACE"), "{run}");
    assert_eq!(template_image(&fx.get("web").await), v2);
    let observed = wait_status(&fx.api, "web", "the new revision observed", ROLLOUT, |cs| {
        status_i64(cs, "updatedReplicas") == 0
    })
    .await
    .expect("observed");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let update = status_str(&observed, "updateRevision").to_string();
    let on_update = |pods: &[Pod]| pods.iter().filter(|p| pod_revision(p) == update).count();
    assert_eq!(
        on_update(&fx.pod_list("web").await),
        0,
        "paused: no Pod updated"
    );
    let run = kk
        .run(&["rollout", "status", "clone/web", "--timeout", "5s"])
        .await
        .expect("run");
    assert_code(&run, PAUSED);

    let run = kk
        .run(&["rollout", "resume", "clone/web"])
        .await
        .expect("run");
    assert_code(&run, OK);
    assert_eq!(run.stdout.trim(), "cloneset/web resumed", "{run}");
    assert_eq!(strategy_field(&fx.get("web").await, "paused"), false);
    let status = ["rollout", "status", "clone/web", "--timeout", "3m"];
    let run = kk.run_for(&status, CLI_LIMIT).await.expect("run");
    assert_code(&run, OK);
    assert!(run.stdout.contains("1 of 4 pods updated"), "{run}");
    assert_eq!(
        on_update(&fx.pod_list("web").await),
        1,
        "partition 3 keeps 3"
    );

    let run = kk
        .run(&["rollout", "promote", "clone/web"])
        .await
        .expect("run");
    assert_code(&run, OK);
    assert!(run.stdout.contains("partition 3 -> 2"), "{run}");
    assert_eq!(strategy_field(&fx.get("web").await, "partition"), 2);
    let run = kk.run_for(&status, CLI_LIMIT).await.expect("run");
    assert_code(&run, OK);
    assert!(run.stdout.contains("2 of 4 pods updated"), "{run}");
    assert_eq!(
        on_update(&fx.pod_list("web").await),
        2,
        "one batch promoted"
    );

    // Promoting a paused rollout resumes it.
    assert_code(
        &kk.run(&["rollout", "pause", "clone/web"])
            .await
            .expect("run"),
        OK,
    );
    let run = kk
        .run(&["rollout", "promote", "clone/web", "--full"])
        .await
        .expect("run");
    assert_code(&run, OK);
    assert!(
        run.stdout.contains("partition 2 -> 0") && run.stdout.contains("resumed"),
        "{run}"
    );
    let cs = fx.get("web").await;
    assert_eq!(strategy_field(&cs, "partition"), 0);
    assert_eq!(strategy_field(&cs, "paused"), false);
    let run = kk.run_for(&status, CLI_LIMIT).await.expect("run");
    assert_code(&run, OK);
    assert!(run.stdout.contains("successfully rolled out"), "{run}");
    let after = fx.pod_list("web").await;
    assert_eq!(on_update(&after), 4, "all 4 updated");
    for (name, (uid, ..)) in incarnations(&after) {
        assert_eq!(
            before.get(&name).map(|b| &b.0),
            Some(&uid),
            "{name} was updated in place"
        );
    }
    fx.ns.delete().await.expect("delete ns");
}

/// `set image --dry-run` tells in place from recreate and changes nothing.
#[tokio::test]
async fn set_image_dry_run_explains_and_changes_nothing() {
    let fx = fixture("e2e-cli-dryrun").await;
    let recreate =
        json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "ReCreate"}});
    let (a, b) = tokio::join!(
        fx.cloneset("inplace", 1, in_place(json!({}))),
        fx.cloneset("recreate", 1, recreate)
    );
    let deployments: Api<Deployment> = fx.ns.api();
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "plain"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "plain"}},
            "template": {"metadata": {"labels": {"app": "plain"}},
                "spec": {"containers": [{"name": "app", "image": image("testapp", "v1")}]}}
        }
    }))
    .expect("Deployment");
    deployments
        .create(&PostParams::default(), &deploy)
        .await
        .expect("create Deployment");
    let pods_before = incarnations(
        &fx.pods
            .list(&ListParams::default())
            .await
            .expect("pods")
            .items,
    );

    let v1 = image("testapp", "v1");
    let v2 = image("testapp", "v2");
    let change = format!("app={v2}");
    let dry = |target: &'static str| {
        let kk = fx.kk.clone();
        let change = change.clone();
        async move {
            kk.run(&["set", "image", target, &change, "--dry-run"])
                .await
                .expect("run")
        }
    };

    let run = dry("clone/inplace").await;
    assert_code(&run, OK);
    assert!(
        run.stdout.contains(&format!("container app: {v1} -> {v2}")),
        "{run}"
    );
    assert!(
        run.stdout.contains("IN PLACE") && !run.stdout.contains("RECREATED"),
        "{run}"
    );
    assert!(run.stdout.contains("dry run: nothing changed"), "{run}");

    let run = dry("clone/recreate").await;
    assert_code(&run, OK);
    assert!(
        run.stdout.contains("RECREATED")
            && run.stdout.contains("ReCreate")
            && !run.stdout.contains("IN PLACE"),
        "{run}"
    );
    assert!(run.stdout.contains("dry run: nothing changed"), "{run}");

    let run = dry("deploy/plain").await;
    assert_code(&run, OK);
    assert!(run.stdout.contains("RECREATED"), "{run}");

    let bad = fx
        .kk
        .run(&["set", "image", "clone/inplace", "nope=x:1", "--dry-run"])
        .await
        .expect("run");
    assert_code(&bad, USAGE);
    assert_one_error_line(&bad, "containers: app");

    for (name, was) in [("inplace", &a), ("recreate", &b)] {
        let now = fx.get(name).await;
        assert_eq!(
            now.metadata.generation, was.metadata.generation,
            "{name}: generation"
        );
        assert_eq!(template_image(&now), v1, "{name}: template image");
        assert_eq!(
            status_str(&now, "updateRevision"),
            status_str(was, "updateRevision"),
            "{name}: revision"
        );
    }
    let d = deployments.get("plain").await.expect("Deployment");
    assert_eq!(d.metadata.generation, Some(1), "Deployment untouched");
    let pods_after = incarnations(
        &fx.pods
            .list(&ListParams::default())
            .await
            .expect("pods")
            .items,
    );
    for (name, was) in &pods_before {
        // The Deployment's Pod may still be starting; only the identity must be the same.
        assert_eq!(
            pods_after.get(name).map(|p| &p.0),
            Some(&was.0),
            "{name} untouched"
        );
    }
    fx.ns.delete().await.expect("delete ns");
}

/// `recreate-container POD -c app --wait` returns 0 once the container was recreated: same Pod,
/// new container, one more restart.
#[tokio::test]
async fn recreate_container_restarts_in_place() {
    let fx = fixture("e2e-cli-crr").await;
    fx.cloneset("web", 1, in_place(json!({}))).await;
    let pod = fx.pod_list("web").await.remove(0);
    let name = pod.name_any();
    let before = incarnations(std::slice::from_ref(&pod))[&name].clone();

    let run = fx
        .kk
        .run_for(
            &[
                "recreate-container",
                &name,
                "-c",
                "app",
                "--wait",
                "--timeout",
                "90s",
            ],
            CLI_LIMIT,
        )
        .await
        .expect("run");
    assert_code(&run, OK);
    assert!(
        run.stdout
            .contains(&format!("containers of pod {name} recreated")),
        "{run}"
    );

    // The kubelet reports the new container a moment after the daemon saw it start.
    let after = wait_pod(
        &fx.pods,
        &name,
        "the new app container reported",
        Duration::from_secs(15),
        |p| {
            container_status(p, "app")
                .is_some_and(|c| c.container_id.as_deref() != Some(before.1.as_str()))
        },
    )
    .await
    .expect("new container");
    let now = &incarnations(std::slice::from_ref(&after))[&name];
    assert_eq!(now.0, before.0, "same Pod UID");
    assert_ne!(now.1, before.1, "new containerID");
    assert_eq!(now.2, before.2 + 1, "restartCount + 1");

    // kruise-tools' spelling: `create ContainerRecreateRequest NAME --pod P`, its defaults.
    let run = fx
        .kk
        .run_for(
            &[
                "create",
                "ContainerRecreateRequest",
                "by-name",
                "--pod",
                &name,
                "--containers=app",
                "--minStartedSeconds=1",
                "--wait",
                "--timeout",
                "90s",
            ],
            CLI_LIMIT,
        )
        .await
        .expect("run create crr");
    assert_code(&run, OK);
    assert!(
        run.stdout
            .contains("containerrecreaterequest/by-name created"),
        "{run}"
    );
    let crrs: Api<DynamicObject> = Api::namespaced_with(
        fx.client.clone(),
        &fx.ns.name,
        &kruise_e2e::plugin::kruise_resource(&fx.client, "containerrecreaterequests").await,
    );
    let crr = crrs.get("by-name").await.expect("the named CRR");
    assert_eq!(crr.data["spec"]["strategy"]["unreadyGracePeriodSeconds"], 3);
    assert_eq!(crr.data["spec"]["strategy"]["minStartedSeconds"], 1);
    assert_eq!(crr.data["spec"]["activeDeadlineSeconds"], 300);
    assert_eq!(crr.data["spec"]["ttlSecondsAfterFinished"], 1800);
    let again = wait_pod(
        &fx.pods,
        &name,
        "the second new app container reported",
        Duration::from_secs(15),
        |p| container_status(p, "app").is_some_and(|c| c.restart_count == now.2 + 1),
    )
    .await
    .expect("recreated again");
    assert_eq!(again.uid().as_deref(), Some(now.0.as_str()), "same Pod UID");
    fx.ns.delete().await.expect("delete ns");
}

/// `image pull IMG --wait` returns 0 once the node has the image: NodeImage says so, and a Pod
/// using it starts without pulling.
#[tokio::test]
async fn image_pull_waits_until_the_node_has_the_image() {
    let fx = fixture("e2e-cli-pull").await;
    let v3 = image("testapp", "v3");
    let run = fx
        .kk
        .run_for(
            &["image", "pull", &v3, "--wait", "--timeout", "3m"],
            CLI_LIMIT,
        )
        .await
        .expect("run");
    assert_code(&run, OK);
    assert!(run.stdout.contains("pulled on 1 node\n"), "{run}");

    let node = Api::<Node>::all(fx.client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items
        .remove(0)
        .name_any();
    let nodeimages: Api<DynamicObject> = Api::all_with(
        fx.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(keys::APPS_GROUP, keys::VERSION_V1ALPHA1, "NodeImage"),
            "nodeimages",
        ),
    );
    let ni = nodeimages.get(&node).await.expect("NodeImage of the node");
    let (repo, tag) = v3.rsplit_once(':').expect("tagged image");
    let tags = &ni.data["status"]["imageStatuses"][repo]["tags"];
    let entry = tags
        .as_array()
        .and_then(|t| t.iter().find(|t| t["tag"] == tag))
        .unwrap_or_else(|| {
            panic!(
                "NodeImage {node} status lists {repo}:{tag}: {}",
                ni.data["status"]
            )
        });
    assert_eq!(entry["phase"], "Succeeded", "{entry}");

    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "uses-v3"},
        "spec": {"containers": [{"name": "app", "image": v3, "imagePullPolicy": "IfNotPresent"}]}
    }))
    .expect("Pod");
    fx.pods
        .create(&PostParams::default(), &pod)
        .await
        .expect("create Pod");
    wait_pod(&fx.pods, "uses-v3", "running", ROLLOUT, |p| {
        container_status(p, "app")
            .is_some_and(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
    })
    .await
    .expect("Pod running");
    let events: Api<Event> = fx.ns.api();
    let pulled = wait_for("the Pulled event", Duration::from_secs(30), || async {
        let list = events.list(&ListParams::default()).await?.items;
        let mine: Vec<Event> = list
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some("uses-v3"))
            .collect();
        Ok(mine
            .iter()
            .any(|e| e.reason.as_deref() == Some("Pulled"))
            .then_some(mine))
    })
    .await
    .expect("events");
    let summary: Vec<String> = pulled
        .iter()
        .map(|e| format!("{:?}: {:?}", e.reason, e.message))
        .collect();
    assert!(
        pulled.iter().any(|e| e.reason.as_deref() == Some("Pulled")
            && e.message
                .as_deref()
                .is_some_and(|m| m.contains("already present"))),
        "started without a pull: {summary:?}"
    );
    assert!(
        !pulled
            .iter()
            .any(|e| e.reason.as_deref() == Some("Pulling")),
        "no pull: {summary:?}"
    );
    fx.ns.delete().await.expect("delete ns");
}

/// `rollout restart clone/X` restarts every Pod in place: same UIDs, restartCount + 1 each.
#[tokio::test]
async fn rollout_restart_restarts_every_pod_in_place() {
    let fx = fixture("e2e-cli-restart").await;
    fx.cloneset("web", 3, in_place(json!({"maxUnavailable": 1})))
        .await;
    let before = incarnations(&fx.pod_list("web").await);

    let run = fx
        .kk
        .run_for(
            &["rollout", "restart", "clone/web", "--timeout", "90s"],
            CLI_LIMIT,
        )
        .await
        .expect("run");
    assert_code(&run, OK);
    assert!(
        run.stdout.contains("all 3 pods restarted in place"),
        "{run}"
    );
    assert!(
        run.stdout.contains("3 batches"),
        "one Pod at a time (maxUnavailable 1): {run}"
    );

    let after = wait_for(
        "every Pod reporting its new container",
        Duration::from_secs(15),
        || async {
            let now = incarnations(&cloneset::pods(&fx.pods, "web").await?);
            Ok(now
                .iter()
                .all(|(n, c)| before.get(n).is_some_and(|b| b.1 != c.1))
                .then_some(now))
        },
    )
    .await
    .expect("restarted");
    assert_eq!(after.len(), 3, "{after:?}");
    for (name, (uid, _, restarts)) in &before {
        let now = after
            .get(name)
            .unwrap_or_else(|| panic!("{name} was replaced: {after:?}"));
        assert_eq!(&now.0, uid, "{name} kept its UID");
        assert_eq!(now.2, restarts + 1, "{name} restarted once");
    }
    fx.ns.delete().await.expect("delete ns");
}

/// Unknown kinds, missing objects and a bad kubeconfig: documented codes, one-line messages.
#[tokio::test]
async fn error_paths_have_documented_codes() {
    let fx = fixture("e2e-cli-errors").await;
    let kk = &fx.kk;
    let ns = fx.ns.name.clone();

    let run = kk
        .run(&["rollout", "status", "job/web"])
        .await
        .expect("run");
    assert_code(&run, NOT_FOUND);
    assert_one_error_line(&run, "unknown kind \"job\"");

    // A kind the plugin knows, absent from the namespace: not found, naming kind and namespace.
    let run = kk
        .run(&["rollout", "status", "statefulset/web"])
        .await
        .expect("run");
    assert_code(&run, NOT_FOUND);
    assert_one_error_line(
        &run,
        &format!("StatefulSet \"web\" not found in namespace \"{ns}\""),
    );

    let missing = format!("CloneSet \"nope\" not found in namespace \"{ns}\"");
    for args in [
        &["rollout", "status", "clone/nope"][..],
        &["rollout", "status", "clone/nope", "-o", "json"],
        &["rollout", "pause", "clone/nope"],
        &["rollout", "partition", "clone/nope", "1"],
        &["set", "image", "clone/nope", "app=x:1"],
        &["rollout", "restart", "clone/nope"],
    ] {
        let run = kk.run(args).await.expect("run");
        assert_code(&run, NOT_FOUND);
        assert_one_error_line(&run, &missing);
        assert!(run.stdout.trim().is_empty(), "nothing on stdout: {run}");
    }
    let run = kk
        .run(&["rollout", "status", "deploy/nope"])
        .await
        .expect("run");
    assert_code(&run, NOT_FOUND);
    assert_one_error_line(
        &run,
        &format!("Deployment \"nope\" not found in namespace \"{ns}\""),
    );
    let run = kk.run(&["recreate-container", "nope"]).await.expect("run");
    assert_code(&run, NOT_FOUND);
    assert_one_error_line(
        &run,
        &format!("Pod \"nope\" not found in namespace \"{ns}\""),
    );

    let run = kk
        .run(&["rollout", "partition", "clone/web", "lots"])
        .await
        .expect("run");
    assert_code(&run, USAGE);
    // A percentage over 100% is refused for what it is, not as unreadable.
    let run = kk
        .run(&["rollout", "partition", "clone/web", "150%"])
        .await
        .expect("run");
    assert_code(&run, USAGE);
    assert!(
        run.stderr
            .contains("\"150%\" is out of range: a percentage must be between 0% and 100%"),
        "{run}"
    );
    assert!(!run.stderr.contains("neither"), "{run}");

    let mut unusable = kk.clone();
    unusable.kubeconfig = std::env::temp_dir().join("kruise-e2e-no-such-kubeconfig");
    let run = unusable
        .run(&["rollout", "status", "clone/web"])
        .await
        .expect("run");
    assert_code(&run, UNREACHABLE);
    assert_one_error_line(&run, "kubeconfig");
    fx.ns.delete().await.expect("delete ns");
}
