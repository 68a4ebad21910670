use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use serde_json::json;

use super::super::Metrics;
use super::tables::scaled;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1beta1::CloneSet;

fn cloneset(name: &str, partition: serde_json::Value) -> CloneSet {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "CloneSet",
        "metadata": {"name": name, "namespace": "ns", "generation": 3},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "app", "image": "nginx"}]}},
            "updateStrategy": {"rollingUpdate": {"partition": partition, "paused": true}},
        },
        "status": {
            "observedGeneration": 3, "replicas": 4, "readyReplicas": 3, "availableReplicas": 3,
            "updatedReplicas": 2, "updatedReadyReplicas": 1, "updatedAvailableReplicas": 1,
            "expectedUpdatedReplicas": 2, "currentRevision": "web-1", "updateRevision": "web-2",
            "conditions": [{"type": "FailedScale", "status": "False"}],
            "labelSelector": "app=web",
        },
    }))
    .expect("CloneSet")
}

fn leading_metrics() -> (Metrics, reflector::store::Writer<CloneSet>) {
    let m = Metrics::new();
    m.is_leader.set(1);
    let (store, writer) = reflector::store::<CloneSet>();
    m.workloads.clonesets.set(store);
    (m, writer)
}

#[test]
fn cloneset_gauges_follow_the_store() {
    let (m, mut writer) = leading_metrics();
    let cs = cloneset("web", json!("50%"));
    writer.apply_watcher_event(&Event::Apply(cs.clone()));
    let text = m.encode().expect("encode");
    for line in [
        "kruise_cloneset_spec_replicas{namespace=\"ns\",name=\"web\"} 4",
        "kruise_cloneset_spec_strategy_partition{namespace=\"ns\",name=\"web\"} 2",
        "kruise_cloneset_spec_strategy_paused{namespace=\"ns\",name=\"web\"} 1",
        "kruise_cloneset_metadata_generation{namespace=\"ns\",name=\"web\"} 3",
        "kruise_cloneset_status_replicas_updated{namespace=\"ns\",name=\"web\"} 2",
        "kruise_cloneset_status_replicas_ready{namespace=\"ns\",name=\"web\"} 3",
        "kruise_cloneset_status_replicas_updated_ready{namespace=\"ns\",name=\"web\"} 1",
        "kruise_cloneset_status_condition{namespace=\"ns\",name=\"web\",condition=\"FailedScale\",status=\"false\"} 1",
        "kruise_cloneset_status_condition{namespace=\"ns\",name=\"web\",condition=\"FailedScale\",status=\"true\"} 0",
        "kruise_cloneset_status_update_revision{namespace=\"ns\",name=\"web\",revision=\"web-2\"} 1",
        "kruise_cloneset_status_current_revision{namespace=\"ns\",name=\"web\",revision=\"web-1\"} 1",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    // One exposition, one end marker, after both registries.
    assert_eq!(text.matches("# EOF").count(), 1);
    assert!(text.trim_end().ends_with("# EOF"));

    writer.apply_watcher_event(&Event::Delete(cs));
    let text = m.encode().expect("encode");
    assert!(!text.contains("name=\"web\""), "series left:\n{text}");
}

#[test]
fn off_and_standby_export_no_workload_series() {
    let (m, mut writer) = leading_metrics();
    writer.apply_watcher_event(&Event::Apply(cloneset("web", json!(0))));
    m.workloads.set_enabled(false);
    assert!(!m.encode().expect("encode").contains("kruise_cloneset_"));
    m.workloads.set_enabled(true);
    m.is_leader.set(0);
    assert!(!m.encode().expect("encode").contains("kruise_cloneset_"));
}

#[test]
fn partitions_scale_as_the_controllers_do() {
    let pct = |s: &str| IntOrString::String(s.into());
    assert_eq!(scaled(None, 5), 0);
    assert_eq!(scaled(Some(&IntOrString::Int(3)), 5), 3);
    assert_eq!(scaled(Some(&IntOrString::Int(9)), 5), 5);
    assert_eq!(scaled(Some(&pct("50%")), 5), 3);
    assert_eq!(scaled(Some(&pct("30%")), 4), 2);
    assert_eq!(scaled(Some(&pct("bad")), 4), 0);
}

#[test]
fn inplace_observer_feeds_the_histogram_and_counters() {
    use crate::inplace::InPlaceObserver;
    let m = Metrics::new();
    m.update_started("cloneset");
    m.update_ready("cloneset", std::time::Duration::from_secs(3));
    m.recreate_started("cloneset");
    let text = m.encode().expect("encode");
    for line in [
        "kruise_manager_inplace_update_duration_seconds_count{controller=\"cloneset\"} 1",
        "kruise_manager_inplace_update_duration_seconds_bucket{le=\"4.0\",controller=\"cloneset\"} 1",
        "kruise_manager_pod_updates_total{controller=\"cloneset\",method=\"in_place\"} 1",
        "kruise_manager_pod_updates_total{controller=\"cloneset\",method=\"recreate\"} 1",
        "kruise_manager_inplace_updates_started_total{controller=\"cloneset\"} 1",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

#[test]
fn jobs_and_spreads_show_their_phase_progress_and_subsets() {
    use kruise_api::apps::v1alpha1::WorkloadSpread;
    use kruise_api::apps::v1beta1::BroadcastJob;
    let m = Metrics::new();
    m.is_leader.set(1);
    let (bj_store, mut bj_writer) = reflector::store::<BroadcastJob>();
    m.workloads.broadcastjobs.set(bj_store);
    let (ws_store, mut ws_writer) = reflector::store::<WorkloadSpread>();
    m.workloads.workloadspreads.set(ws_store);
    let bj: BroadcastJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "BroadcastJob",
        "metadata": {"name": "warm", "namespace": "ns"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
        "status": {"desired": 3, "active": 1, "succeeded": 2, "failed": 0, "phase": "running"},
    }))
    .expect("BroadcastJob");
    let ws: WorkloadSpread = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
        "metadata": {"name": "spread", "namespace": "ns", "generation": 2},
        "spec": {"targetRef": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
                               "name": "web"},
                 "subsets": [{"name": "a", "maxReplicas": 2}, {"name": "b"}]},
        "status": {"observedGeneration": 2, "subsetStatuses": [
            {"name": "a", "replicas": 2, "missingReplicas": 0,
             "creatingPods": {"web-x": "2026-12-07T08:00:00Z"}},
            {"name": "b", "replicas": 1, "missingReplicas": -1},
        ]},
    }))
    .expect("WorkloadSpread");
    bj_writer.apply_watcher_event(&Event::Apply(bj.clone()));
    ws_writer.apply_watcher_event(&Event::Apply(ws.clone()));
    let text = m.encode().expect("encode");
    for line in [
        "kruise_broadcastjob_status_desired{namespace=\"ns\",name=\"warm\"} 3",
        "kruise_broadcastjob_status_succeeded{namespace=\"ns\",name=\"warm\"} 2",
        "kruise_broadcastjob_status_phase{namespace=\"ns\",name=\"warm\",phase=\"running\"} 1",
        "kruise_broadcastjob_status_phase{namespace=\"ns\",name=\"warm\",phase=\"completed\"} 0",
        "kruise_broadcastjob_status_completion_time{namespace=\"ns\",name=\"warm\"} 0",
        "kruise_workloadspread_status_observed_generation{namespace=\"ns\",name=\"spread\"} 2",
        "kruise_workloadspread_subset_replicas{namespace=\"ns\",name=\"spread\",subset=\"a\"} 2",
        "kruise_workloadspread_subset_missing_replicas{namespace=\"ns\",name=\"spread\",subset=\"b\"} -1",
        "kruise_workloadspread_subset_creating_pods{namespace=\"ns\",name=\"spread\",subset=\"a\"} 1",
        "kruise_workloadspread_subset_deleting_pods{namespace=\"ns\",name=\"spread\",subset=\"b\"} 0",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    bj_writer.apply_watcher_event(&Event::Delete(bj));
    ws_writer.apply_watcher_event(&Event::Delete(ws));
    let text = m.encode().expect("encode");
    assert!(!text.contains("name=\"warm\""), "series left:\n{text}");
    assert!(!text.contains("name=\"spread\""), "series left:\n{text}");
}
