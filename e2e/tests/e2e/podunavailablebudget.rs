//! PodUnavailableBudget end to end: a budget of maxUnavailable 1 over a 3-replica CloneSet,
//! charged by evictions, deletes and dry runs through the Pod webhook, counted back by the
//! controller; and the validation refusals, each naming its field.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_api::policy::v1alpha1::{PodUnavailableBudget, PodUnavailableBudgetStatus};
use kruise_e2e::cloneset::{self, wait_rolled_out};
use kruise_e2e::manager;
use kruise_e2e::{TestNamespace, client, client_without_retry, wait_for, wait_pod};
use kube::api::{DeleteParams, EvictParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const ROLLOUT: Duration = Duration::from_secs(180);
const SETTLE: Duration = Duration::from_secs(60);

fn budget(name: &str, spec: Value) -> PodUnavailableBudget {
    serde_json::from_value(json!({
        "apiVersion": keys::POLICY_V1ALPHA1,
        "kind": keys::PUB_KIND,
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("a PodUnavailableBudget")
}

/// (unavailableAllowed, currentAvailable, desiredAvailable, totalReplicas).
fn counts(s: &PodUnavailableBudgetStatus) -> (i32, i32, i32, i32) {
    (
        s.unavailable_allowed,
        s.current_available,
        s.desired_available,
        s.total_replicas,
    )
}

async fn wait_counts(
    api: &Api<PodUnavailableBudget>,
    want: (i32, i32, i32, i32),
) -> PodUnavailableBudgetStatus {
    wait_for(&format!("budget status {want:?}"), SETTLE, || async {
        let b = api.get("pub").await?;
        let observed = b.status.as_ref().map(|s| s.observed_generation) == b.metadata.generation;
        Ok(b.status.filter(|s| observed && counts(s) == want))
    })
    .await
    .expect("budget status")
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected a refusal from the API server, got {other}"),
    }
}

/// Every status the budget went through, from a watch started before the disruptions: each with
/// the budget's resourceVersion, and why the watch stopped if it did. A watch that stops (an
/// error, the server closing it) fails the test at its next check instead of leaving a record
/// that silently ends.
#[derive(Default)]
struct Watched {
    statuses: Vec<(String, PodUnavailableBudgetStatus)>,
    ended: Option<String>,
}

type Seen = Arc<Mutex<Watched>>;

fn watch_budget(api: Api<PodUnavailableBudget>) -> (Seen, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let task = tokio::spawn(async move {
        let why = follow_budget(&api, &sink).await;
        if let Ok(mut w) = sink.lock() {
            w.ended = Some(why);
        }
    });
    (seen, task)
}

/// Records the budget's statuses until the watch stops; returns why it stopped.
async fn follow_budget(api: &Api<PodUnavailableBudget>, sink: &Seen) -> String {
    let params = WatchParams::default().fields("metadata.name=pub");
    let mut stream = match api.watch(&params, "0").await {
        Ok(stream) => stream.boxed(),
        Err(e) => return format!("the watch did not start: {e}"),
    };
    loop {
        match stream.next().await {
            Some(Ok(WatchEvent::Added(b) | WatchEvent::Modified(b))) => {
                let rv = b.resource_version().unwrap_or_default();
                if let (Some(s), Ok(mut w)) = (b.status, sink.lock()) {
                    w.statuses.push((rv, s));
                }
            }
            Some(Ok(WatchEvent::Bookmark(_))) => {}
            Some(Ok(WatchEvent::Deleted(_))) => return "the budget was deleted".to_owned(),
            Some(Ok(WatchEvent::Error(e))) => return format!("the watch sent an error: {e:?}"),
            Some(Err(e)) => return format!("the watch failed: {e}"),
            None => return "the server closed the watch".to_owned(),
        }
    }
}

/// Waits until the watch has delivered the budget's state at `rv` or later (so every status
/// written up to it is in the record) and returns the record's statuses; fails if the watch
/// stopped. resourceVersions are compared as numbers (etcd's revisions): a watch that starts
/// after `rv` begins at a later one.
async fn watched_up_to(seen: &Seen, rv: &str) -> Vec<PodUnavailableBudgetStatus> {
    wait_for(
        &format!("the budget watch to deliver resourceVersion {rv}"),
        Duration::from_secs(10),
        || async {
            let w = seen.lock().expect("the watch's record");
            if let Some(why) = &w.ended {
                panic!("the budget watch stopped ({why}): the record proves nothing after it");
            }
            let reached = |v: &str| match (v.parse::<u64>(), rv.parse::<u64>()) {
                (Ok(v), Ok(rv)) => v >= rv,
                _ => v == rv,
            };
            Ok(w.statuses
                .iter()
                .any(|(v, _)| reached(v))
                .then(|| w.statuses.iter().map(|(_, s)| s.clone()).collect()))
        },
    )
    .await
    .expect("the budget watch caught up")
}

/// A Pod the budget covers that never gets Ready (its readiness probe asks a closed port); not
/// the CloneSet's (no `app` label), so it is not adopted.
fn unready_pod() -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "unready", "labels": {"tier": "front"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "app",
                "image": kruise_e2e::image("testapp", "v1"),
                "readinessProbe": {"tcpSocket": {"port": 9}, "periodSeconds": 1}
            }]
        }
    }))
    .expect("pod")
}

/// Scenario: evict A (201), evict B (429), delete B (403), dry-run delete (no charge), a
/// not-ready Pod's delete (no charge); the status at each step; the budget back once A's
/// replacement is Ready.
#[tokio::test]
async fn budget_guards_evictions_and_deletes() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-pub").await.expect("ns");
    let sets = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let budgets: Api<PodUnavailableBudget> = ns.api();
    // The default client retries a 429 until it passes, as drain does; this one shows it.
    let strict: Api<Pod> =
        Api::namespaced(client_without_retry().await.expect("cluster"), &ns.name);
    let strategy =
        json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}});
    let mut cs = cloneset::new("web", 3, "v1", strategy).expect("cs");
    // The budget selects `tier`, which the stray Pod below shares without being adopted.
    cs.data["spec"]["template"]["metadata"]["labels"]["tier"] = json!("front");
    sets.create(&PostParams::default(), &cs)
        .await
        .expect("create CloneSet");
    wait_rolled_out(&sets, "web", 3, ROLLOUT)
        .await
        .expect("rollout");

    let spec = json!({"selector": {"matchLabels": {"tier": "front"}}, "maxUnavailable": 1});
    budgets
        .create(&PostParams::default(), &budget("pub", spec))
        .await
        .expect("create budget");
    wait_counts(&budgets, (1, 3, 2, 3)).await;
    // The controller marks the Pods that existed before the budget.
    let marked = wait_for("Pods marked with the budget", SETTLE, || async {
        let list = cloneset::pods(&pods, "web").await?;
        let all = list.len() == 3
            && list.iter().all(|p| {
                p.annotations()
                    .get(keys::PUB_RELATED_ANNOTATION)
                    .map(String::as_str)
                    == Some("pub")
            });
        Ok(all.then_some(list))
    })
    .await
    .expect("annotations");
    let (a, b) = (marked[0].name_any(), marked[1].name_any());
    let (seen, watch) = watch_budget(budgets.clone());
    // The watch is established (it has delivered the budget as it is now) before any disruption.
    let current = budgets.get("pub").await.expect("budget");
    watched_up_to(&seen, &current.resource_version().unwrap_or_default()).await;

    // A dry-run delete is judged but not charged.
    pods.delete(
        &b,
        &DeleteParams {
            dry_run: true,
            ..Default::default()
        },
    )
    .await
    .expect("dry-run delete is allowed");
    let now = budgets
        .get("pub")
        .await
        .expect("budget")
        .status
        .unwrap_or_default();
    assert_eq!(
        counts(&now),
        (1, 3, 2, 3),
        "a dry run must not consume the budget"
    );
    assert!(now.disrupted_pods.is_empty(), "{now:?}");
    assert!(
        pods.get_opt(&b).await.expect("get").is_some(),
        "dry run deleted {b}"
    );

    // The first eviction is allowed; right after it (before A's replacement can be Ready) the
    // second is refused with 429, as a PodDisruptionBudget would, so drain retries, and a
    // direct delete with 403.
    pods.evict(&a, &EvictParams::default())
        .await
        .expect("eviction of A is allowed");
    let err = api_error(
        strict
            .evict(&b, &EvictParams::default())
            .await
            .expect_err("B is protected"),
    );
    assert_eq!(err.code, 429, "{err:?}");
    assert!(
        err.message.contains("pub unavailable allowed is negative"),
        "{err:?}"
    );
    let err = api_error(
        pods.delete(&b, &DeleteParams::default())
            .await
            .expect_err("B is protected"),
    );
    assert_eq!(err.code, 403, "{err:?}");
    assert!(
        err.message
            .contains(r#"podunavailablebudget.policy.kruise.io "pub" is forbidden"#),
        "{err:?}"
    );
    assert!(
        pods.get_opt(&b).await.expect("get").is_some(),
        "{b} survived"
    );
    // The webhook's refusals are on B as upstream's Warning Event, and on no other Pod.
    let events: Api<k8s_openapi::api::core::v1::Event> = ns.api();
    let on = wait_for("the refusal's Event", Duration::from_secs(10), || async {
        let on: Vec<String> = events
            .list(&kube::api::ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(keys::PUB_REASON_PREVENT_POD_DELETION))
            .filter(|e| e.type_.as_deref() == Some("Warning"))
            .filter_map(|e| e.involved_object.name)
            .collect();
        Ok((!on.is_empty()).then_some(on))
    })
    .await
    .expect("Event");
    assert!(on.iter().all(|n| n == &b), "{on:?}");
    // Both refusals are counted as upstream counts them: under B's workload and the requester.
    let refusals = manager::metric_sum(
        &client,
        "kruise_manager_pod_unavailable_budget_total",
        &format!("kind_namespace_name=\"CloneSet_{}_web\"", ns.name),
    )
    .await
    .expect("the manager's metrics");
    assert_eq!(refusals, 2.0, "the 429 and the 403");
    // The eviction was recorded: A in disruptedPods, nothing more allowed.
    wait_for(
        "A recorded in disruptedPods",
        Duration::from_secs(10),
        || async {
            let w = seen.lock().expect("the watch's record");
            if let Some(why) = &w.ended {
                panic!("the budget watch stopped ({why})");
            }
            let recorded = w
                .statuses
                .iter()
                .any(|(_, s)| s.disrupted_pods.contains_key(&a) && s.unavailable_allowed == 0);
            Ok(recorded.then_some(()))
        },
    )
    .await
    .expect("the webhook's status write");

    // A Pod that is not Ready costs nothing to delete, even with the budget spent. It was
    // marked by the Pod webhook at creation.
    pods.create(&PostParams::default(), &unready_pod())
        .await
        .expect("create unready Pod");
    let unready = wait_pod(&pods, "unready", "running, not ready", SETTLE, |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await
    .expect("unready Pod");
    assert_eq!(
        unready
            .annotations()
            .get(keys::PUB_RELATED_ANNOTATION)
            .map(String::as_str),
        Some("pub"),
        "marked at creation"
    );
    assert!(!kruise_e2e::pod_ready(&unready));
    pods.delete("unready", &DeleteParams::default())
        .await
        .expect("a not-ready Pod's delete passes");
    let after = budgets.get("pub").await.expect("budget");
    // The budget may have come back meanwhile (A's replacement), so the proof is the record:
    // every status up to the one read after the delete, from a watch that never stopped.
    let history = watched_up_to(&seen, &after.resource_version().unwrap_or_default()).await;
    let charged: Vec<_> = history
        .iter()
        .chain(after.status.as_ref())
        .filter(|s| s.disrupted_pods.contains_key("unready"))
        .collect();
    assert!(
        charged.is_empty(),
        "a not-ready Pod is not charged: {charged:?}"
    );

    // A's replacement becomes Ready: the budget is back.
    wait_counts(&budgets, (1, 3, 2, 3)).await;
    watch.abort();
    // With the budget back, B's eviction passes at the first try.
    strict
        .evict(&b, &EvictParams::default())
        .await
        .expect("eviction of B is allowed once A's replacement is Ready");
    // Without the budget the namespace's Pods can go.
    budgets
        .delete("pub", &DeleteParams::default())
        .await
        .expect("delete budget");
    ns.delete().await.expect("cleanup");
}

/// Each refusal of the budget's validation names the field.
#[tokio::test]
async fn bad_budgets_are_refused_naming_the_field() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-pub-bad")
        .await
        .expect("ns");
    let budgets: Api<PodUnavailableBudget> = ns.api();
    let sel = json!({"matchLabels": {"app": "web"}});
    let cases = [
        (
            json!({"selector": sel}),
            "spec.maxUnavailable, minAvailable",
        ),
        (
            json!({"selector": sel, "maxUnavailable": 1, "minAvailable": 1}),
            "maxUnavailable and minAvailable are mutually exclusive",
        ),
        (
            json!({"selector": sel, "maxUnavailable": "150%"}),
            "spec.maxUnavailable",
        ),
        (json!({"maxUnavailable": 1}), "spec.selector, targetRef"),
        (
            json!({"selector": sel, "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}, "maxUnavailable": 1}),
            "selector and targetRef are mutually exclusive",
        ),
        (
            json!({"selector": {"matchExpressions": [{"key": "app", "operator": "Near"}]}, "maxUnavailable": 1}),
            "spec.selector.matchExpressions[0].operator",
        ),
    ];
    for (i, (spec, field)) in cases.into_iter().enumerate() {
        let err = budgets
            .create(
                &PostParams::default(),
                &budget(&format!("bad-{i}"), spec.clone()),
            )
            .await
            .expect_err(&format!("{spec} must be refused"));
        let s = api_error(err);
        assert!(s.message.contains(field), "{spec}: {}", s.message);
    }
    let mut annotated = budget("bad-ops", json!({"selector": sel, "maxUnavailable": 1}));
    annotated.metadata.annotations = Some(
        [(
            keys::PUB_PROTECT_OPERATIONS_ANNOTATION.to_owned(),
            "DELETE,DRAIN".to_owned(),
        )]
        .into(),
    );
    let s = api_error(
        budgets
            .create(&PostParams::default(), &annotated)
            .await
            .expect_err("refused"),
    );
    assert!(
        s.message
            .contains("metadata.annotations[kruise.io/pub-protect-operations]"),
        "{}",
        s.message
    );

    // A valid one; then a second over the same Pods, and a selector change, are refused.
    budgets
        .create(
            &PostParams::default(),
            &budget("first", json!({"selector": sel, "maxUnavailable": 1})),
        )
        .await
        .expect("a valid budget");
    let s = api_error(
        budgets
            .create(
                &PostParams::default(),
                &budget("second", json!({"selector": sel, "minAvailable": "50%"})),
            )
            .await
            .expect_err("overlap"),
    );
    assert!(
        s.message.contains("spec.selector") && s.message.contains("first"),
        "{}",
        s.message
    );
    // The manager writes the new budget's status meanwhile: a 409 is that race, not the answer.
    let mut s = None;
    for _ in 0..10 {
        let mut first = budgets.get("first").await.expect("first");
        first.spec.selector = serde_json::from_value(json!({"matchLabels": {"app": "db"}})).ok();
        let e = api_error(
            budgets
                .replace("first", &PostParams::default(), &first)
                .await
                .expect_err("immutable"),
        );
        if e.code != 409 {
            s = Some(e);
            break;
        }
    }
    let s = s.expect("an answer other than a conflict");
    assert!(
        s.message
            .contains("selector and targetRef cannot be modified"),
        "{}",
        s.message
    );
    ns.delete().await.expect("cleanup");
}

/// A CloneSet allowed to update every Pod at once (maxUnavailable 100%) under a budget that
/// allows one: the in-place rollout goes one Pod at a time (the CloneSet charges the budget
/// before each update, under PodUnavailableBudgetUpdateGate, which the shipped install turns
/// on), finishes, and the Pods kept waiting got upstream's Event.
#[tokio::test]
async fn in_place_rollout_waits_for_the_budget() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-pub-roll")
        .await
        .expect("ns");
    let sets = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let budgets: Api<PodUnavailableBudget> = ns.api();
    let strategy = json!({"type": "RollingUpdate", "rollingUpdate": {
        "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "100%"}});
    let cs = cloneset::new("web", 3, "v1", strategy).expect("cs");
    sets.create(&PostParams::default(), &cs)
        .await
        .expect("create CloneSet");
    wait_rolled_out(&sets, "web", 3, ROLLOUT)
        .await
        .expect("rollout");
    let spec = json!({"targetRef": {"apiVersion": keys::APPS_V1BETA1, "kind": "CloneSet", "name": "web"},
        "maxUnavailable": 1});
    budgets
        .create(&PostParams::default(), &budget("pub", spec))
        .await
        .expect("create budget");
    wait_counts(&budgets, (1, 3, 2, 3)).await;
    wait_for("Pods marked with the budget", SETTLE, || async {
        let list = cloneset::pods(&pods, "web").await?;
        Ok(list
            .iter()
            .all(|p| p.annotations().contains_key(keys::PUB_RELATED_ANNOTATION))
            .then_some(()))
    })
    .await
    .expect("annotations");
    let before: Vec<String> = cloneset::pods(&pods, "web")
        .await
        .expect("pods")
        .iter()
        .filter_map(|p| p.uid())
        .collect();

    let recorder = kruise_e2e::recorder::PodRecorder::start(pods.clone(), "app=web");
    cloneset::set_image(&sets, "web", "v2")
        .await
        .expect("set image");
    wait_rolled_out(&sets, "web", 3, ROLLOUT)
        .await
        .expect("the rollout finishes");
    let after: Vec<String> = cloneset::pods(&pods, "web")
        .await
        .expect("pods")
        .iter()
        .filter_map(|p| p.uid())
        .collect();
    assert_eq!(before, after, "updated in place: same Pods");
    assert_eq!(
        recorder.max_unavailable(),
        1,
        "one Pod at a time: {:?}",
        recorder.history()
    );
    // The Pods that waited carried upstream's Event.
    let events: Api<k8s_openapi::api::core::v1::Event> = ns.api();
    let waited = events
        .list(&kube::api::ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(keys::PUB_REASON_PREVENT_POD_DELETION))
        .filter(|e| e.involved_object.kind.as_deref() == Some("Pod"))
        .count();
    assert!(
        waited > 0,
        "no Pod carried {}",
        keys::PUB_REASON_PREVENT_POD_DELETION
    );
    budgets
        .delete("pub", &DeleteParams::default())
        .await
        .expect("delete budget");
    ns.delete().await.expect("cleanup");
}

/// How soon a budget must follow its workload (upstream's spec waits 30 s; the controller's
/// resync, all a budget had before it watched workloads, is 300 s).
const FOLLOW: Duration = Duration::from_secs(30);

/// Upstream's "selector pods and scale down/delete deployment ignore": a budget allowing no
/// disruption over a Deployment follows the Deployment's scale-down and deletion at once, so
/// the ReplicaSet's and the garbage collector's Pod deletes are admitted and no Pod is left.
#[tokio::test]
async fn budget_follows_a_deployment_scaled_down_and_deleted() {
    use k8s_openapi::api::apps::v1::Deployment;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-pub-deploy")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    let budgets: Api<PodUnavailableBudget> = ns.api();
    let deployments: Api<Deployment> = ns.api();
    let spec = json!({"selector": {"matchLabels": {"app": "guarded"}}, "maxUnavailable": 0});
    budgets
        .create(&PostParams::default(), &budget("pub", spec))
        .await
        .expect("create budget");
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "guarded"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "guarded"}},
            "template": {
                "metadata": {"labels": {"app": "guarded"}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "app", "image": kruise_e2e::image("testapp", "v1")}]
                }
            }
        }
    }))
    .expect("deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create Deployment");
    wait_counts(&budgets, (0, 2, 2, 2)).await;

    let follow = |want: (i32, i32, i32, i32), left: usize, what: &'static str| {
        let (budgets, pods) = (budgets.clone(), pods.clone());
        async move {
            wait_for(what, FOLLOW, || async {
                let b = budgets.get("pub").await?;
                let list = pods
                    .list(&kube::api::ListParams::default().labels("app=guarded"))
                    .await?;
                let n = list.items.len();
                Ok(b.status
                    .filter(|s| counts(s) == want && n == left)
                    .map(|_| ()))
            })
            .await
            .expect(what);
        }
    };
    deployments
        .patch(
            "guarded",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scale down");
    follow(
        (0, 1, 1, 1),
        1,
        "one Pod left and the budget at 1 after the scale-down",
    )
    .await;
    deployments
        .delete("guarded", &DeleteParams::background())
        .await
        .expect("delete Deployment");
    follow(
        (0, 0, 0, 0),
        0,
        "no Pod left and the budget at 0 after the deletion",
    )
    .await;
    ns.delete().await.expect("cleanup");
}
