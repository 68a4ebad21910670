//! The workload metrics, end to end: the installed manager's `/metrics` (read through the API
//! server's Pod proxy) follows a CloneSet through an in-place rollout and forgets it once it is
//! deleted.

use std::time::Duration;

use kruise_api::keys;
use kruise_api::policy::v1alpha1::PodUnavailableBudget;
use kruise_e2e::broadcastjob;
use kruise_e2e::cloneset::{self, set_image, wait_rolled_out};
use kruise_e2e::manager::{metric_samples, metric_sum};
use kruise_e2e::{TestNamespace, client, wait_for};
use kube::Api;
use kube::Client;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

const ROLLOUT: Duration = Duration::from_secs(180);
/// Workload gauges are computed at each scrape; this covers the store catching up.
const SCRAPE: Duration = Duration::from_secs(30);

/// The value of `metric` for the CloneSet `name` of `ns`; `None` while no replica exports it.
async fn gauge(client: &Client, metric: &str, ns: &str, name: &str) -> Option<f64> {
    let labels = format!("namespace=\"{ns}\",name=\"{name}\"");
    let samples = metric_samples(client, metric, &labels).await.ok()?;
    samples.first().copied()
}

/// After an in-place rollout of 2 Pods, the CloneSet's gauges show its replicas, updated and
/// ready counts, and the in-place duration histogram has at least one observation per Pod; a
/// budget over the CloneSet shows its totals; after the budget and the CloneSet are deleted
/// their series are gone.
#[tokio::test]
async fn cloneset_rollout_shows_in_metrics_and_leaves_with_it() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-metrics")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let strategy = json!({"type": "RollingUpdate", "rollingUpdate": {
        "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "100%"}});
    let cs = cloneset::new("web", 2, "v1", strategy).expect("cs");
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create CloneSet");
    wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("initial rollout");

    // A budget that allows every Pod at once: it is counted, it never holds the rollout back.
    let budgets: Api<PodUnavailableBudget> = Api::namespaced(client.clone(), &ns.name);
    let budget: PodUnavailableBudget = serde_json::from_value(json!({
        "apiVersion": keys::POLICY_V1ALPHA1,
        "kind": keys::PUB_KIND,
        "metadata": {"name": "web-budget"},
        "spec": {"targetRef": {"apiVersion": keys::APPS_V1ALPHA1, "kind": "CloneSet", "name": "web"},
                 "maxUnavailable": "100%"},
    }))
    .expect("a PodUnavailableBudget");
    budgets
        .create(&PostParams::default(), &budget)
        .await
        .expect("create budget");

    let durations = "kruise_manager_inplace_update_duration_seconds_count";
    let in_place = "kruise_manager_pod_updates_total";
    let cs_label = "controller=\"cloneset\"";
    let durations_before = metric_sum(&client, durations, cs_label)
        .await
        .expect("scrape");
    let in_place_label = "controller=\"cloneset\",method=\"in_place\"";
    let updates_before = metric_sum(&client, in_place, in_place_label)
        .await
        .expect("scrape");

    set_image(&api, "web", "v2").await.expect("set image");
    wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("in-place rollout");

    let want = [
        ("kruise_cloneset_spec_replicas", 2.0),
        ("kruise_cloneset_status_replicas", 2.0),
        ("kruise_cloneset_status_replicas_updated", 2.0),
        ("kruise_cloneset_status_replicas_ready", 2.0),
        ("kruise_cloneset_status_replicas_updated_ready", 2.0),
    ];
    let name = &ns.name;
    wait_for("the CloneSet's gauges at 2", SCRAPE, || async {
        for (metric, value) in want {
            if gauge(&client, metric, name, "web").await != Some(value) {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await
    .expect("gauges");
    // Other tests update CloneSets in place at the same time: the counts only grow, so at least
    // this rollout's two Pods must show.
    let durations_after = metric_sum(&client, durations, cs_label)
        .await
        .expect("scrape");
    assert!(
        durations_after - durations_before >= 2.0,
        "in-place duration observations went from {durations_before} to {durations_after}"
    );
    let updates_after = metric_sum(&client, in_place, in_place_label)
        .await
        .expect("scrape");
    assert!(
        updates_after - updates_before >= 2.0,
        "in-place updates went from {updates_before} to {updates_after}"
    );
    let revision = metric_samples(
        &client,
        "kruise_cloneset_status_update_revision",
        &format!("namespace=\"{name}\",name=\"web\""),
    )
    .await
    .expect("scrape");
    assert_eq!(revision, vec![1.0], "one update revision series");
    wait_for("the budget's gauges", SCRAPE, || async {
        let total = gauge(
            &client,
            "kruise_podunavailablebudget_status_total_replicas",
            name,
            "web-budget",
        )
        .await;
        let allowed = gauge(
            &client,
            "kruise_podunavailablebudget_status_unavailable_allowed",
            name,
            "web-budget",
        )
        .await;
        Ok((total == Some(2.0) && allowed == Some(2.0)).then_some(()))
    })
    .await
    .expect("budget gauges");
    budgets
        .delete("web-budget", &DeleteParams::default())
        .await
        .expect("delete budget");
    wait_for("the budget's series to go", SCRAPE, || async {
        let labels = format!("namespace=\"{name}\",name=\"web-budget\"");
        let left = metric_samples(
            &client,
            "kruise_podunavailablebudget_status_total_replicas",
            &labels,
        )
        .await?;
        Ok(left.is_empty().then_some(()))
    })
    .await
    .expect("budget series removed");

    api.delete("web", &DeleteParams::foreground())
        .await
        .expect("delete CloneSet");
    wait_for("the CloneSet's series to go", SCRAPE, || async {
        let labels = format!("namespace=\"{name}\",name=\"web\"");
        let left = metric_samples(&client, "kruise_cloneset_spec_replicas", &labels).await?;
        let conditions =
            metric_samples(&client, "kruise_cloneset_status_condition", &labels).await?;
        Ok((left.is_empty() && conditions.is_empty()).then_some(()))
    })
    .await
    .expect("series removed");
    ns.delete().await.expect("delete ns");
}

/// A BroadcastJob run to its end shows in `/metrics` as upstream's status says it: desired and
/// succeeded (one per eligible node) and `status_phase{phase="completed"}` 1, the other phases
/// 0; once it is deleted its series are gone.
#[tokio::test]
async fn broadcastjob_phase_and_progress_show_in_metrics_and_leave_with_it() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-metrics-job")
        .await
        .expect("ns");
    let nodes = broadcastjob::eligible_nodes(&client).await.expect("nodes");
    let api = broadcastjob::api(&client, &ns.name);
    let job = broadcastjob::new("warm", "echo done", "Never", json!({})).expect("job");
    api.create(&PostParams::default(), &job)
        .await
        .expect("create BroadcastJob");
    broadcastjob::wait_phase(&api, "warm", "completed", ROLLOUT)
        .await
        .expect("completed");
    let n = nodes.len() as f64;
    let name = ns.name.as_str();
    let phase = |p: &str| format!("namespace=\"{name}\",name=\"warm\",phase=\"{p}\"");
    wait_for("the job's gauges", SCRAPE, || async {
        let desired = gauge(&client, "kruise_broadcastjob_status_desired", name, "warm").await;
        let done = gauge(
            &client,
            "kruise_broadcastjob_status_succeeded",
            name,
            "warm",
        )
        .await;
        let completed = metric_samples(
            &client,
            "kruise_broadcastjob_status_phase",
            &phase("completed"),
        )
        .await?;
        let running = metric_samples(
            &client,
            "kruise_broadcastjob_status_phase",
            &phase("running"),
        )
        .await?;
        Ok(
            (desired == Some(n) && done == Some(n) && completed == [1.0] && running == [0.0])
                .then_some(()),
        )
    })
    .await
    .expect("job gauges");
    api.delete("warm", &DeleteParams::foreground())
        .await
        .expect("delete BroadcastJob");
    wait_for("the job's series to go", SCRAPE, || async {
        let labels = format!("namespace=\"{name}\",name=\"warm\"");
        let left = metric_samples(&client, "kruise_broadcastjob_status_desired", &labels).await?;
        let phases = metric_samples(&client, "kruise_broadcastjob_status_phase", &labels).await?;
        Ok((left.is_empty() && phases.is_empty()).then_some(()))
    })
    .await
    .expect("series removed");
    ns.delete().await.expect("delete ns");
}
