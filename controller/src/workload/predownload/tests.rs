use super::*;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1beta1::{
    CloneSet, CloneSetPodUpdateStrategyType, CloneSetSpec, CloneSetStatus,
    RollingUpdateCloneSetStrategy, StatefulSet, StatefulSetUpdateStrategyType,
};
use kruise_api::appspub::InPlaceUpdateStrategy;

fn rev(name: &str, images: &[(&str, &str)]) -> ControllerRevision {
    let containers: Vec<serde_json::Value> = images
        .iter()
        .map(|(n, i)| json!({"name": n, "image": i}))
        .collect();
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            labels: Some(
                [(
                    keys::k8s::CONTROLLER_REVISION_HASH_KEY.to_string(),
                    name.rsplit('-').next().unwrap_or_default().to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        data: Some(RawExtension(
            json!({"spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}, "$patch": "replace"}}}),
        )),
        revision: 1,
    }
}

fn cs(replicas: i32) -> CloneSet {
    let mut c = CloneSet::new(
        "web",
        CloneSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some([("app".to_string(), "web".to_string())].into()),
                    annotations: Some([("a".to_string(), "b".to_string())].into()),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "main".into(),
                        image: Some("app:v2".into()),
                        ..Default::default()
                    }],
                    image_pull_secrets: Some(vec![
                        k8s_openapi::api::core::v1::LocalObjectReference { name: "reg".into() },
                    ]),
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
    );
    c.metadata.namespace = Some("ns".into());
    c.metadata.uid = Some("uid-cs".into());
    c.spec.update_strategy.rolling_update = Some(RollingUpdateCloneSetStrategy {
        pod_update_policy: Some(CloneSetPodUpdateStrategyType::InPlaceIfPossible),
        ..Default::default()
    });
    c
}

fn kind(d: &Decision) -> String {
    match d {
        Decision::Create(j) => format!("create {}", j.len()),
        other => format!("{other:?}"),
    }
}

#[test]
fn decision_table() {
    let cur = rev("web-aaa", &[("main", "app:v1"), ("side", "s:1")]);
    let upd = rev("web-bbb", &[("main", "app:v2"), ("side", "s:1")]);
    let mut labelled = upd.clone();
    labelled
        .labels_mut()
        .insert(keys::IMAGE_PREDOWNLOAD_CREATED_LABEL.into(), "true".into());
    let base = cs(10);
    let small = cs(3);
    let mut recreate = cs(10);
    recreate
        .spec
        .update_strategy
        .rolling_update
        .as_mut()
        .expect("r")
        .pod_update_policy = Some(CloneSetPodUpdateStrategyType::ReCreate);
    let mut one_batch = cs(10);
    one_batch
        .spec
        .update_strategy
        .rolling_update
        .as_mut()
        .expect("r")
        .max_unavailable = Some(IntOrString::String("100%".into()));
    let mut one_batch_partitioned = one_batch.clone();
    one_batch_partitioned
        .spec
        .update_strategy
        .rolling_update
        .as_mut()
        .expect("r")
        .partition = Some(IntOrString::Int(2));
    let mut wait = cs(10);
    wait.spec
        .update_strategy
        .rolling_update
        .as_mut()
        .expect("r")
        .in_place_update_strategy = Some(InPlaceUpdateStrategy {
        image_pre_download_min_updated_ready_pods: Some(2),
        ..Default::default()
    });
    let mut ready = wait.clone();
    ready.status = Some(CloneSetStatus {
        update_revision: "web-bbb".into(),
        updated_ready_replicas: 2,
        ..Default::default()
    });
    let cases: Vec<(
        &str,
        &CloneSet,
        &ControllerRevision,
        &ControllerRevision,
        bool,
        &str,
    )> = vec![
        ("same revision", &base, &upd, &upd, true, "DeleteJobs"),
        ("create", &base, &cur, &upd, true, "create 1"),
        ("already labelled", &base, &cur, &labelled, true, "Done"),
        (
            "recreate policy",
            &recreate,
            &cur,
            &upd,
            true,
            "Ignore(\"update policy is ReCreate\")",
        ),
        (
            "few replicas",
            &small,
            &cur,
            &upd,
            true,
            "Ignore(\"too few replicas\")",
        ),
        (
            "one batch",
            &one_batch,
            &cur,
            &upd,
            true,
            "Ignore(\"all pods update in one batch\")",
        ),
        (
            "partition keeps batches",
            &one_batch_partitioned,
            &cur,
            &upd,
            true,
            "create 1",
        ),
        (
            "not in place",
            &base,
            &cur,
            &upd,
            false,
            "Ignore(\"the revision cannot be applied in place\")",
        ),
        ("min ready not reached", &wait, &cur, &upd, true, "Wait"),
        ("min ready reached", &ready, &cur, &upd, true, "create 1"),
    ];
    for (what, c, a, b, can, want) in cases {
        let w = Workload::cloneset(c).expect("named");
        assert_eq!(kind(&decide(&w, a, b, can).expect(what)), want, "{what}");
    }
}

#[test]
fn job_shape_matches_upstream() {
    let cur = rev("web-aaa", &[("main", "app:v1")]);
    let upd = rev("web-bbb", &[("main", "app:v2"), ("new", "n:1")]);
    let mut c = cs(10);
    c.metadata.annotations = Some(
        [
            (
                keys::IMAGE_PREDOWNLOAD_PARALLELISM_ANNOTATION.to_string(),
                "5".to_string(),
            ),
            (
                keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_ANNOTATION.to_string(),
                "77".to_string(),
            ),
        ]
        .into(),
    );
    let jobs = jobs_for(&Workload::cloneset(&c).expect("named"), &cur, &upd).expect("jobs");
    let names: Vec<String> = jobs.iter().map(|j| j.name_any()).collect();
    assert_eq!(names, vec!["web-bbb-main", "web-bbb-new"]);
    let j = &jobs[0];
    assert_eq!(j.spec.image, "app:v2");
    let t = &j.spec.template;
    assert_eq!(t.parallelism, Some(IntOrString::Int(5)));
    assert_eq!(
        t.pull_policy,
        Some(PullPolicy {
            timeout_seconds: Some(77),
            backoff_limit: Some(1)
        })
    );
    assert_eq!(t.completion_policy.ttl_seconds_after_finished, Some(600));
    assert_eq!(t.pull_secrets, vec!["reg"]);
    let ps = t.pod_selector.as_ref().expect("podSelector");
    assert_eq!(ps.match_labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(ps.match_expressions[0].operator, "NotIn");
    assert_eq!(
        ps.match_expressions[0].values,
        Some(vec!["web-bbb".to_string(), "bbb".to_string()])
    );
    // Upstream labels the job with the revision's `controller.kubernetes.io/hash`.
    assert_eq!(
        j.labels()
            .get(keys::k8s::CONTROLLER_REVISION_HASH_KEY)
            .map(String::as_str),
        Some("bbb")
    );
    assert_eq!(j.labels().get("app").map(String::as_str), Some("web"));
    let o = &j.owner_references()[0];
    assert_eq!(
        (o.kind.as_str(), o.uid.as_str(), o.controller),
        ("CloneSet", "uid-cs", Some(true))
    );
    let sb = t.sandbox_config.as_ref().expect("sandbox");
    assert_eq!(sb.annotations.get("a").map(String::as_str), Some("b"));

    // The v1beta1 fields win over the annotations.
    c.spec
        .update_strategy
        .rolling_update
        .as_mut()
        .expect("r")
        .in_place_update_strategy = Some(InPlaceUpdateStrategy {
        image_pre_download_parallelism: Some(IntOrString::Int(2)),
        image_pre_download_timeout_seconds: Some(30),
        ..Default::default()
    });
    let t = &jobs_for(&Workload::cloneset(&c).expect("named"), &cur, &upd).expect("jobs")[0]
        .spec
        .template;
    assert_eq!(t.parallelism, Some(IntOrString::Int(2)));
    assert_eq!(
        t.pull_policy.as_ref().and_then(|p| p.timeout_seconds),
        Some(30)
    );
    // Defaults.
    let t = &jobs_for(&Workload::cloneset(&cs(10)).expect("named"), &cur, &upd).expect("jobs")[0]
        .spec
        .template;
    assert_eq!(t.parallelism, Some(IntOrString::Int(1)));
    assert_eq!(
        t.pull_policy.as_ref().and_then(|p| p.timeout_seconds),
        Some(keys::DEFAULT_IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS)
    );
}

#[test]
fn predownload_runs_only_under_its_gate() {
    let cases = [
        ("", false),
        ("PreDownloadImageForInPlaceUpdate=true", true),
        ("ImagePullJobGate=true", false),
        // No daemon, no pulls: upstream's rules turn the gate off.
        (
            "PreDownloadImageForInPlaceUpdate=true,KruiseDaemon=false",
            false,
        ),
    ];
    for (flag, want) in cases {
        let gates = FeatureGates::parse(flag).expect(flag);
        assert_eq!(enabled(&gates), want, "{flag}");
    }
}

fn sts(replicas: i32, rolling: serde_json::Value) -> StatefulSet {
    let mut s: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "ns", "uid": "uid-sts"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                         "spec": {"containers": [{"name": "main", "image": "app:v2"}]}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling}
        }
    }))
    .expect("statefulset");
    if rolling.is_null() {
        s.spec.update_strategy.rolling_update = None;
    }
    s
}

/// Upstream `createImagePullJobsForInPlaceUpdate` of the Advanced StatefulSet: its own
/// strategy rules (OnDelete, no rollingUpdate, ReCreate), an int partition, and the numbers
/// from annotations only.
#[test]
fn statefulset_decision_table() {
    let cur = rev("db-aaa", &[("main", "app:v1")]);
    let upd = rev("db-bbb", &[("main", "app:v2")]);
    let in_place = json!({"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 2});
    let mut on_delete = sts(10, in_place.clone());
    on_delete.spec.update_strategy.type_ = Some(StatefulSetUpdateStrategyType::OnDelete);
    let mut wait = sts(10, in_place.clone());
    wait.annotations_mut().insert(
        keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_ANNOTATION.into(),
        "50%".into(),
    );
    let cases: Vec<(&str, StatefulSet, bool, &str)> = vec![
        ("create", sts(10, in_place.clone()), true, "create 1"),
        (
            "on delete",
            on_delete,
            true,
            "Ignore(\"update strategy is OnDelete\")",
        ),
        (
            "no rolling update",
            sts(10, serde_json::Value::Null),
            true,
            "Ignore(\"update policy is ReCreate\")",
        ),
        (
            "recreate",
            sts(10, json!({"podUpdatePolicy": "ReCreate"})),
            true,
            "Ignore(\"update policy is ReCreate\")",
        ),
        (
            "few replicas",
            sts(3, in_place.clone()),
            true,
            "Ignore(\"too few replicas\")",
        ),
        (
            "one batch",
            sts(
                10,
                json!({"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "100%"}),
            ),
            true,
            "Ignore(\"all pods update in one batch\")",
        ),
        (
            "partition keeps batches",
            sts(
                10,
                json!({"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "100%", "partition": 1}),
            ),
            true,
            "create 1",
        ),
        (
            "not in place",
            sts(10, in_place.clone()),
            false,
            "Ignore(\"the revision cannot be applied in place\")",
        ),
        ("50% of 10 updated ready first", wait, true, "Wait"),
    ];
    for (what, s, can, want) in cases {
        let w = Workload::statefulset(&s).expect("named");
        assert_eq!(
            kind(&decide(&w, &cur, &upd, can).expect(what)),
            want,
            "{what}"
        );
    }
}

#[test]
fn statefulset_jobs_are_owned_by_it_and_read_its_annotations() {
    let cur = rev("db-aaa", &[("main", "app:v1")]);
    let upd = rev("db-bbb", &[("main", "app:v2")]);
    let mut s = sts(
        10,
        json!({"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 2}),
    );
    let job = |s: &StatefulSet| {
        jobs_for(&Workload::statefulset(s).expect("named"), &cur, &upd)
            .expect("jobs")
            .remove(0)
    };
    let j = job(&s);
    assert_eq!(j.name_any(), "db-bbb-main");
    let o = &j.owner_references()[0];
    assert_eq!(
        (
            o.kind.as_str(),
            o.name.as_str(),
            o.uid.as_str(),
            o.controller
        ),
        ("StatefulSet", "db", "uid-sts", Some(true))
    );
    let t = &j.spec.template;
    assert_eq!(t.parallelism, Some(IntOrString::Int(1)));
    assert_eq!(
        t.pull_policy.as_ref().and_then(|p| p.timeout_seconds),
        Some(300)
    );
    let ps = t.pod_selector.as_ref().expect("podSelector");
    assert_eq!(ps.match_labels.get("app").map(String::as_str), Some("db"));
    assert_eq!(
        ps.match_expressions[0].values,
        Some(vec!["db-bbb".to_string(), "bbb".to_string()])
    );
    s.annotations_mut().extend([
        (
            keys::IMAGE_PREDOWNLOAD_PARALLELISM_ANNOTATION.to_string(),
            "3".to_string(),
        ),
        (
            keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_ANNOTATION.to_string(),
            "45".to_string(),
        ),
    ]);
    let t = job(&s).spec.template;
    assert_eq!(t.parallelism, Some(IntOrString::Int(3)));
    assert_eq!(t.pull_policy.and_then(|p| p.timeout_seconds), Some(45));
}
