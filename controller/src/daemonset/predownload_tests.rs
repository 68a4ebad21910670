use super::*;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::json;

fn rev(name: &str, images: &[(&str, &str)]) -> ControllerRevision {
    let containers: Vec<serde_json::Value> = images
        .iter()
        .map(|(n, i)| json!({"name": n, "image": i}))
        .collect();
    serde_json::from_value::<ControllerRevision>(json!({
        "metadata": {"name": name, "namespace": "ns",
                     // Every revision carries its hash under both keys (revision.rs, revisions.rs).
                     "labels": {"controller-revision-hash": name.rsplit('-').next(),
                                "controller.kubernetes.io/hash": name.rsplit('-').next()}},
        "revision": 1
    }))
    .map(|mut r| {
        r.data = Some(RawExtension(json!({"spec": {"template": {
            "metadata": {"labels": {"app": "agent"}},
            "spec": {"containers": containers}, "$patch": "replace"}}})));
        r
    })
    .expect("revision")
}

/// A DaemonSet on 4 nodes, none updated yet to revision `h2`, with these rolling-update fields.
fn ds(rolling: serde_json::Value, annotations: serde_json::Value) -> DaemonSet {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "ns", "uid": "u1", "annotations": annotations},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"containers": [{"name": "main", "image": "app:v2"}]}},
                 "updateStrategy": {"rollingUpdate": rolling}},
        "status": {"desiredNumberScheduled": 4, "currentNumberScheduled": 4,
                   "numberMisscheduled": 0, "numberReady": 4, "updatedNumberScheduled": 0,
                   "updateRevision": "h1"}
    }))
    .expect("ds")
}

fn kind(d: &Decision) -> String {
    match d {
        Decision::Create(jobs) => format!("create {}", jobs.len()),
        other => format!("{other:?}"),
    }
}

#[test]
fn decision_follows_upstream() {
    let (old, new) = (
        rev("agent-h1", &[("main", "app:v1"), ("side", "s:v1")]),
        rev("agent-h2", &[("main", "app:v2"), ("side", "s:v1")]),
    );
    let d = |ds: &DaemonSet| kind(&decide(ds, "h2", &new, &[&old]).expect("decides"));
    // Default maxUnavailable 1 of 4 nodes: one job, for the changed image only.
    assert_eq!(d(&ds(json!({}), json!({}))), "create 1");
    // Every Pod in one batch: nothing to get ahead of.
    assert_eq!(
        d(&ds(json!({"maxUnavailable": "100%"}), json!({}))),
        "Ignore(\"all pods update in one batch\")"
    );
    // A partition keeps a batch back even then.
    assert_eq!(
        d(&ds(json!({"maxUnavailable": 4, "partition": 1}), json!({}))),
        "create 1"
    );
    // Settled: the jobs go.
    let mut settled = ds(json!({}), json!({}));
    if let Some(st) = settled.status.as_mut() {
        st.updated_number_scheduled = 4;
        st.update_revision = "h2".into();
    }
    assert_eq!(d(&settled), "DeleteJobs");
    // A revision is handled once.
    let mut done = new.clone();
    done.metadata
        .labels
        .get_or_insert_default()
        .insert(keys::IMAGE_PREDOWNLOAD_CREATED_LABEL.into(), "true".into());
    let got = decide(&ds(json!({}), json!({})), "h2", &done, &[&old]).expect("decides");
    assert_eq!(got, Decision::Done);
}

#[test]
fn an_image_is_new_when_any_old_revision_differs_or_none_has_the_container() {
    let olds = [
        rev("agent-h0", &[("main", "app:v2")]),
        rev("agent-h1", &[("main", "app:v1")]),
    ];
    let new = rev("agent-h2", &[("main", "app:v2"), ("extra", "x:v1")]);
    let got = changed_images_since(&[&olds[0], &olds[1]], &new).expect("diff");
    assert_eq!(
        got.into_iter().collect::<Vec<_>>(),
        [
            ("extra".to_string(), "x:v1".to_string()),
            ("main".to_string(), "app:v2".to_string())
        ]
    );
    let got = changed_images_since(&[&olds[0]], &new).expect("diff");
    assert_eq!(got.keys().collect::<Vec<_>>(), ["extra"]);
}

#[test]
fn jobs_target_the_pods_not_yet_updated_with_the_annotations_settings() {
    let (old, new) = (
        rev("agent-h1", &[("main", "app:v1")]),
        rev("agent-h2", &[("main", "app:v2")]),
    );
    let ds = ds(
        json!({}),
        json!({keys::IMAGE_PREDOWNLOAD_PARALLELISM_ANNOTATION: "3"}),
    );
    let Decision::Create(jobs) = decide(&ds, "h2", &new, &[&old]).expect("decides") else {
        panic!("expected jobs");
    };
    let [job] = jobs.as_slice() else {
        panic!("one job: {jobs:?}")
    };
    assert_eq!(job.metadata.name.as_deref(), Some("agent-h2-main"));
    assert_eq!(job.spec.image, "app:v2");
    let owner = &job.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("DaemonSet", "u1")
    );
    let t = &job.spec.template;
    assert_eq!(t.parallelism, Some(IntOrString::Int(3)));
    let pull = t.pull_policy.as_ref().expect("policy");
    assert_eq!(pull.timeout_seconds, Some(300));
    let sel = t.pod_selector.as_ref().expect("selector");
    assert_eq!(
        sel.match_labels.get("app").map(String::as_str),
        Some("agent")
    );
    let not_in = &sel.match_expressions[0];
    assert_eq!(not_in.operator, "NotIn");
    assert_eq!(
        not_in.values.as_deref(),
        Some(&["agent-h2".to_string(), "h2".to_string()][..])
    );
}

#[test]
fn runs_only_under_its_gate_and_the_daemon() {
    let on = FeatureGates::parse("PreDownloadImageForDaemonSetUpdate=true").expect("gates");
    assert!(enabled(&on));
    assert!(!enabled(&FeatureGates::parse("").expect("gates")));
    let no_daemon =
        FeatureGates::parse("PreDownloadImageForDaemonSetUpdate=true,KruiseDaemon=false")
            .expect("gates");
    assert!(!enabled(&no_daemon));
}
