//! `rollout status` says why a rollout does not progress, for each cause a user meets: four
//! CloneSets in one namespace, each held by its own cause — paused, a PodUnavailableBudget that
//! allows no disruption, a lifecycle hook's label, and a crash-looping new revision that takes the
//! `maxUnavailable` budget from the Pod after it. Each `rollout status` must end with the
//! documented exit code and name the held Pod with its reason. (The image that cannot be pulled
//! is `cli_workloads::status_names_the_pod_and_why_a_rollout_is_stuck`.)
//!
//! Needs the binary: `cargo build -p kubectl-kruise`.

use k8s_openapi::api::core::v1::{Event, Pod};
use kruise_api::keys;
use kruise_api::policy::v1alpha1::PodUnavailableBudget;
use kruise_e2e::plugin::{
    CLI_LIMIT, Fixture, assert_code, assert_stdout, described_pods, kruise_resource, template,
};
use kruise_e2e::{container_status, image, wait_for};
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const OK: i32 = 0;
/// `rollout status` exit codes (cli/README.md).
const PAUSED: i32 = 3;
const TIMED_OUT: i32 = 4;

const HOLD: &str = "e2e.kruise.io/update-hold";

fn cloneset(api_version: &str, name: &str, replicas: i32, extra: Value) -> DynamicObject {
    let mut cs = json!({
        "apiVersion": api_version, "kind": "CloneSet", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": template(name, "v1"),
                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                     "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}}}
    });
    if let (Some(spec), Some(extra)) = (cs["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::from_value(cs).expect("CloneSet")
}

async fn pods_of(fx: &Fixture, app: &str) -> Vec<Pod> {
    let mut pods: Vec<Pod> = fx
        .pods
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list Pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    pods.sort_by_key(|p| p.name_any());
    pods
}

/// `rollout status cloneset/NAME --timeout 3s`: it ends at once, held.
async fn status_now(fx: &Fixture, name: &str) -> kruise_e2e::cli::Run {
    fx.kk
        .run_for(
            &[
                "rollout",
                "status",
                &format!("cloneset/{name}"),
                "--timeout",
                "3s",
            ],
            CLI_LIMIT,
        )
        .await
        .expect("run rollout status")
}

#[tokio::test]
async fn status_names_each_cause_that_holds_a_rollout() {
    let fx = Fixture::new("e2e-cli-stuck").await;
    let ar = kruise_resource(&fx.client, "clonesets").await;
    let api: Api<DynamicObject> = Api::namespaced_with(fx.client.clone(), &fx.ns.name, &ar);
    // The budget first: the Pod webhook names it on the Pods it covers as they are created.
    let budgets: Api<PodUnavailableBudget> = fx.ns.api();
    let budget: PodUnavailableBudget = serde_json::from_value(json!({
        "apiVersion": keys::POLICY_V1ALPHA1, "kind": keys::PUB_KIND,
        "metadata": {"name": "guard"},
        "spec": {"selector": {"matchLabels": {"app": "guarded"}}, "minAvailable": 2}
    }))
    .expect("budget");
    budgets
        .create(&PostParams::default(), &budget)
        .await
        .expect("create the budget");
    let mut hooked = cloneset(
        &ar.api_version,
        "hooked",
        1,
        json!({"lifecycle": {"inPlaceUpdate": {"labelsHandler": {HOLD: "true"}}}}),
    );
    hooked.data["spec"]["template"]["metadata"]["labels"][HOLD] = json!("true");
    for cs in [
        cloneset(&ar.api_version, "paused", 1, json!({})),
        cloneset(&ar.api_version, "guarded", 2, json!({})),
        cloneset(&ar.api_version, "crash", 2, json!({})),
        hooked,
    ] {
        api.create(&PostParams::default(), &cs)
            .await
            .expect("create CloneSet");
    }
    let (a, b, c, d) = tokio::join!(
        fx.status("cloneset/paused"),
        fx.status("cloneset/guarded"),
        fx.status("cloneset/crash"),
        fx.status("cloneset/hooked"),
    );
    for run in [&a, &b, &c, &d] {
        assert_code(run, OK);
    }
    let guarded_before: Vec<String> = pods_of(&fx, "guarded")
        .await
        .iter()
        .map(|p| p.uid().unwrap_or_default())
        .collect();
    assert_eq!(guarded_before.len(), 2);

    let v2 = format!("app={}", image("testapp", "v2"));
    assert_code(&fx.run(&["rollout", "pause", "cloneset/paused"]).await, OK);
    for name in ["paused", "guarded", "hooked"] {
        assert_code(
            &fx.run(&["set", "image", &format!("cloneset/{name}"), &v2])
                .await,
            OK,
        );
    }
    // A command that exits: not an in-place change, so the first Pod is recreated and crashes.
    let crash: json_patch::Patch = serde_json::from_value(json!([{
        "op": "add", "path": "/spec/template/spec/containers/0/command",
        "value": ["sh", "-c", "echo failing; exit 3"]}]))
    .expect("patch");
    api.patch("crash", &PatchParams::default(), &Patch::<()>::Json(crash))
        .await
        .expect("patch the command");

    let crashing = wait_for("a crash-looping Pod", CLI_LIMIT, || async {
        Ok(pods_of(&fx, "crash").await.into_iter().find_map(|p| {
            let waiting = container_status(&p, "app")?.state.clone()?.waiting?;
            (waiting.reason.as_deref() == Some("CrashLoopBackOff")).then(|| p.name_any())
        }))
    })
    .await
    .expect("crash-looping Pod");
    let hooked_pod = wait_for("a Pod in PreparingUpdate", CLI_LIMIT, || async {
        Ok(pods_of(&fx, "hooked").await.into_iter().find_map(|p| {
            (p.labels()
                .get(keys::LIFECYCLE_STATE_LABEL)
                .map(String::as_str)
                == Some("PreparingUpdate"))
            .then(|| p.name_any())
        }))
    })
    .await
    .expect("held Pod");
    // The manager tried the guarded update and the budget refused it.
    let events: Api<Event> = fx.ns.api();
    let refused = wait_for("the budget's refusal", CLI_LIMIT, || async {
        let list = events
            .list(
                &ListParams::default()
                    .fields(&format!("reason={}", keys::PUB_REASON_PREVENT_POD_DELETION)),
            )
            .await?;
        Ok(list.items.into_iter().find_map(|e| e.involved_object.name))
    })
    .await
    .expect("refusal Event");

    let run = status_now(&fx, "paused").await;
    assert_code(&run, PAUSED);
    let paused_pod = pods_of(&fx, "paused").await[0].name_any();
    assert_stdout(
        &run,
        &format!("  {paused_pod}: the rollout is paused: `rollout resume` lets it go on"),
    );

    let run = status_now(&fx, "guarded").await;
    assert_code(&run, TIMED_OUT);
    assert_stdout(
        &run,
        &format!(
            "  {refused}: its update is refused by PodUnavailableBudget guard (unavailableAllowed 0"
        ),
    );
    assert_stdout(&run, "raise the budget's maxUnavailable");
    // It really held: both Pods are the ones from before, on the old image.
    let guarded = pods_of(&fx, "guarded").await;
    assert_eq!(
        guarded
            .iter()
            .map(|p| p.uid().unwrap_or_default())
            .collect::<Vec<_>>(),
        guarded_before
    );
    for p in &guarded {
        let spec_image = p.spec.as_ref().and_then(|s| s.containers[0].image.clone());
        assert_eq!(
            spec_image,
            Some(image("testapp", "v1")),
            "{} kept its image",
            p.name_any()
        );
    }

    let run = status_now(&fx, "hooked").await;
    assert_code(&run, TIMED_OUT);
    assert_stdout(
        &run,
        &format!("  {hooked_pod}: held by a lifecycle hook (state PreparingUpdate)"),
    );

    let run = status_now(&fx, "crash").await;
    assert_code(&run, TIMED_OUT);
    assert_stdout(
        &run,
        &format!("  {crashing}: container app is crash-looping ("),
    );
    assert_stdout(&run, &format!("--previous {crashing} -c app"));
    let waiting = pods_of(&fx, "crash")
        .await
        .into_iter()
        .map(|p| p.name_any())
        .find(|n| *n != crashing)
        .expect("the Pod after it");
    assert_stdout(
        &run,
        &format!(
            "  {waiting}: waiting for its turn: maxUnavailable is taken by unready {crashing}"
        ),
    );

    // describe: the same holds, the Pods by revision, the kubelet's Events about the crash.
    let (doc, text) = fx.describe("cloneset/crash").await;
    assert_eq!(doc["kind"], "CloneSet", "{doc}");
    assert_eq!(doc["replicas"]["desired"], 2, "{doc}");
    assert_eq!(doc["strategy"]["maxUnavailable"], "1", "{doc}");
    assert_eq!(
        described_pods(&doc, "update"),
        vec![crashing.clone()],
        "{doc}"
    );
    assert_eq!(
        described_pods(&doc, "current"),
        vec![waiting.clone()],
        "{doc}"
    );
    assert!(
        doc["events"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["object"] == format!("pod/{crashing}").as_str()),
        "the crashing Pod's Events: {doc}"
    );
    // Held Pods are listed by name: the Pod waiting behind may come first.
    let held = text.split("Held:\n").nth(1).unwrap_or_default();
    assert!(
        held.contains(&format!("  {crashing}: container app is crash-looping"))
            && held.contains(&format!("  {waiting}: waiting for its turn")),
        "{text}"
    );
}
