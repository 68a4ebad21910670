use super::*;
use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use kruise_api::apps::v1beta1::{
    CompletionPolicy, ImagePullJobNodeSelector, ImagePullJobPodSelector, ImagePullJobSpec,
    ImageTagStatus, NodeImageSpec, NodeImageStatus, PullPolicy,
};

const T0: i64 = 1_700_000_000;

fn ts(s: i64) -> Timestamp {
    Timestamp::from_second(s).expect("ts")
}

fn job(image: &str) -> ImagePullJob {
    let mut j = ImagePullJob::new(
        "j",
        ImagePullJobSpec {
            image: image.into(),
            template: ImagePullJobTemplate::default(),
        },
    );
    j.metadata.namespace = Some("ns".into());
    j.metadata.uid = Some("uid-j".into());
    j
}

fn ni(name: &str, labels: &[(&str, &str)]) -> NodeImage {
    let mut n = NodeImage::new(name, NodeImageSpec::default());
    n.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    n
}

fn pod(name: &str, node: &str, app: &str, created: i64, phase: &str) -> Arc<Pod> {
    let mut p = Pod {
        spec: Some(PodSpec {
            node_name: (!node.is_empty()).then(|| node.to_string()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    p.metadata.name = Some(name.into());
    p.metadata.namespace = Some("ns".into());
    p.metadata.labels = Some([("app".to_string(), app.to_string())].into());
    p.metadata.creation_timestamp = Some(Time(ts(created)));
    Arc::new(p)
}

fn all_nodes() -> Vec<Arc<NodeImage>> {
    vec![
        Arc::new(ni("n1", &[("zone", "a")])),
        Arc::new(ni("n2", &[("zone", "b")])),
        Arc::new(ni("n3", &[("zone", "a")])),
    ]
}

#[test]
fn target_nodes_table() {
    let nodes = all_nodes();
    let pods = vec![
        pod("p1", "n3", "web", T0 + 2, "Running"),
        pod("p2", "n1", "web", T0 + 1, "Running"),
        pod("p3", "n1", "web", T0, "Pending"),
        pod("p4", "n2", "web", T0, "Succeeded"),
        pod("p5", "", "web", T0, "Pending"),
        pod("p6", "gone", "web", T0, "Running"),
        pod("p7", "n2", "db", T0, "Running"),
    ];
    let zone_a = ImagePullJobNodeSelector {
        match_labels: [("zone".to_string(), "a".to_string())].into(),
        ..Default::default()
    };
    let cases: Vec<(&str, ImagePullJobTemplate, Vec<&str>)> = vec![
        (
            "all nodes",
            ImagePullJobTemplate::default(),
            vec!["n1", "n2", "n3"],
        ),
        (
            "names keep order, skip unknown and duplicates",
            ImagePullJobTemplate {
                selector: Some(ImagePullJobNodeSelector {
                    names: vec!["n3".into(), "x".into(), "n1".into(), "n3".into()],
                    ..zone_a.clone()
                }),
                ..Default::default()
            },
            vec!["n3", "n1"],
        ),
        (
            "labels",
            ImagePullJobTemplate {
                selector: Some(zone_a.clone()),
                ..Default::default()
            },
            vec!["n1", "n3"],
        ),
        (
            "pods: active, scheduled, oldest first, each node once",
            ImagePullJobTemplate {
                pod_selector: Some(ImagePullJobPodSelector {
                    match_labels: [("app".to_string(), "web".to_string())].into(),
                    ..Default::default()
                }),
                // podSelector wins over selector.
                selector: Some(zone_a.clone()),
                ..Default::default()
            },
            vec!["n1", "n3"],
        ),
    ];
    for (what, t, want) in cases {
        let got = target_nodes(&t, &nodes, &pods).expect(what);
        assert_eq!(got, want, "{what}");
    }
    let bad = ImagePullJobTemplate {
        selector: Some(ImagePullJobNodeSelector {
            match_expressions: vec![LabelSelectorRequirement {
                key: "zone".into(),
                operator: "In".into(),
                values: None,
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    assert!(target_nodes(&bad, &nodes, &pods).is_err());
}

#[test]
fn parallelism_and_window() {
    let mut t = ImagePullJobTemplate::default();
    assert_eq!(parallelism(&t), 1);
    t.parallelism = Some(IntOrString::Int(3));
    assert_eq!(parallelism(&t), 3);
    t.parallelism = Some(IntOrString::String("2".into()));
    assert_eq!(parallelism(&t), 2);
    t.parallelism = Some(IntOrString::String("50%".into()));
    assert_eq!(parallelism(&t), 0);

    let ns: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let cases = [
        (1, 0, 1),
        (2, 1, 1),
        (2, 2, 0),
        (2, 5, 0),
        (10, 0, 3),
        (0, 0, 0),
    ];
    for (p, active, want) in cases {
        assert_eq!(
            sync_window(p, active, &ns).len(),
            want,
            "p={p} active={active}"
        );
    }
    assert_eq!(sync_window(2, 0, &ns), &ns[..2]);
}

fn with_tag(mut n: NodeImage, name: &str, tag: &str, owner_uid: &str, version: i64) -> NodeImage {
    let mut o = owner_ref(&job("x"));
    o.uid = Some(owner_uid.into());
    n.spec
        .images
        .entry(name.into())
        .or_default()
        .tags
        .push(ImageTagSpec {
            tag: tag.into(),
            version,
            owner_references: vec![o],
            created_at: Some(Time(ts(T0))),
            ..Default::default()
        });
    n
}

fn with_status(
    mut n: NodeImage,
    name: &str,
    tag: &str,
    phase: ImagePullPhase,
    version: i64,
) -> NodeImage {
    let st = n.status.get_or_insert_with(NodeImageStatus::default);
    st.image_statuses
        .entry(name.into())
        .or_default()
        .tags
        .push(ImageTagStatus {
            tag: tag.into(),
            phase,
            version,
            ..Default::default()
        });
    n
}

#[test]
fn status_from_node_images() {
    let j = job("nginx:1");
    let nodes = [
        with_status(
            with_tag(ni("a", &[]), "nginx", "1", "uid-j", 2),
            "nginx",
            "1",
            ImagePullPhase::Succeeded,
            2,
        ),
        with_status(
            with_tag(ni("b", &[]), "nginx", "1", "uid-j", 1),
            "nginx",
            "1",
            ImagePullPhase::Failed,
            1,
        ),
        // Status for an older version: still pulling.
        with_status(
            with_tag(ni("c", &[]), "nginx", "1", "uid-j", 3),
            "nginx",
            "1",
            ImagePullPhase::Succeeded,
            2,
        ),
        // No status yet: pulling.
        with_tag(ni("d", &[]), "nginx", "1", "uid-j", 0),
        // Tag owned by someone else: not synced.
        with_tag(ni("e", &[]), "nginx", "1", "other", 0),
        // Nothing: not synced.
        ni("f", &[]),
    ];
    let refs: Vec<&NodeImage> = nodes.iter().collect();
    let (st, not_synced) = calculate_status(&j, &refs, &[], ts(T0)).expect("status");
    assert_eq!(
        (st.desired, st.active, st.succeeded, st.failed),
        (6, 2, 1, 1)
    );
    assert_eq!(st.failed_nodes, vec!["b"]);
    assert_eq!(not_synced, vec!["e", "f"]);
    assert_eq!(st.start_time, Some(Time(ts(T0))));
    assert_eq!(st.completion_time, None);
    assert_eq!(st.message, "job is running, progress 33.3%");

    // A missing secret makes an otherwise synced node not synced.
    let secret = ReferenceObject::parse("kruise-daemon-config/s-abc");
    let (_, not_synced) = calculate_status(&j, &refs[..1], &[secret], ts(T0)).expect("status");
    assert_eq!(not_synced, vec!["a"]);
}

#[test]
fn completion_and_deadline() {
    let mut j = job("nginx:1");
    let done = [
        with_status(
            with_tag(ni("a", &[]), "nginx", "1", "uid-j", 0),
            "nginx",
            "1",
            ImagePullPhase::Succeeded,
            0,
        ),
        with_status(
            with_tag(ni("b", &[]), "nginx", "1", "uid-j", 0),
            "nginx",
            "1",
            ImagePullPhase::Failed,
            0,
        ),
    ];
    let refs: Vec<&NodeImage> = done.iter().collect();
    let (st, _) = calculate_status(&j, &refs, &[], ts(T0)).expect("status");
    assert_eq!(st.completion_time, Some(Time(ts(T0))));
    assert_eq!(st.message, MSG_COMPLETED);
    // Never: no completion.
    j.spec.template.completion_policy.type_ = Some(CompletionPolicyType::Never);
    let (st, _) = calculate_status(&j, &refs, &[], ts(T0)).expect("status");
    assert_eq!(st.completion_time, None);
    // Zero targets complete an Always job at once.
    let j0 = job("nginx:1");
    let (st, _) = calculate_status(&j0, &[], &[], ts(T0)).expect("status");
    assert!(st.completion_time.is_some());

    // Deadline: unfinished and not-synced nodes count as failed.
    let mut jd = job("nginx:1");
    jd.spec.template.completion_policy = CompletionPolicy {
        active_deadline_seconds: Some(60),
        ..Default::default()
    };
    jd.status = Some(ImagePullJobStatus {
        start_time: Some(Time(ts(T0))),
        ..Default::default()
    });
    let mixed = [
        done[0].clone(),
        with_tag(ni("c", &[]), "nginx", "1", "uid-j", 0),
        ni("d", &[]),
    ];
    let refs: Vec<&NodeImage> = mixed.iter().collect();
    let (st, _) = calculate_status(&jd, &refs, &[], ts(T0 + 59)).expect("status");
    assert_eq!(st.completion_time, None);
    assert_eq!(
        deadline_requeue(&jd, ts(T0), ts(T0 + 59)),
        Some(Duration::from_secs(1))
    );
    assert_eq!(
        deadline_requeue(&jd, ts(T0), ts(T0 + 10)),
        Some(Duration::from_secs(50))
    );
    let (st, not_synced) = calculate_status(&jd, &refs, &[], ts(T0 + 60)).expect("status");
    assert_eq!(st.completion_time, Some(Time(ts(T0 + 60))));
    assert_eq!((st.succeeded, st.failed, st.active), (1, 2, 0));
    assert_eq!(st.failed_nodes, vec!["c", "d"]);
    assert_eq!(st.message, MSG_DEADLINE);
    assert!(not_synced.is_empty());
}

#[test]
fn ttl_table() {
    let cases = [
        (None, T0 + 1000, Ttl::Keep),
        (Some(100), T0 + 40, Ttl::After(Duration::from_secs(60))),
        (Some(100), T0 + 100, Ttl::Delete),
        (Some(0), T0, Ttl::Delete),
    ];
    for (t, now, want) in cases {
        assert_eq!(ttl(t, ts(T0), ts(now)), want, "{t:?} at {now}");
    }
}

#[test]
fn tag_update_adds_new_tag_then_is_idempotent() {
    let mut j = job("127.0.0.1:5000/app:v2");
    j.spec.template.pull_secrets = vec!["s".into()];
    let policy = tag_pull_policy(&j, Jitter::default(), 0);
    let secret = ReferenceObject {
        namespace: "kruise-daemon-config".into(),
        name: "s-abc".into(),
        mode: ReferenceObject::MODE_BATCH.into(),
    };
    // The daemon reported version 4 of this tag earlier: the new tag starts at 5.
    let n = with_status(
        ni("a", &[]),
        "127.0.0.1:5000/app",
        "v2",
        ImagePullPhase::Succeeded,
        4,
    );
    let (name, spec) = tag_update(&n, &j, std::slice::from_ref(&secret), &policy, ts(T0))
        .expect("ok")
        .expect("changed");
    assert_eq!(name, "127.0.0.1:5000/app");
    assert_eq!(spec.tags.len(), 1);
    assert_eq!(spec.tags[0].version, 5);
    assert_eq!(
        spec.tags[0].owner_references[0].uid.as_deref(),
        Some("uid-j")
    );
    assert_eq!(
        spec.tags[0].owner_references[0].kind.as_deref(),
        Some("ImagePullJob")
    );
    assert_eq!(spec.pull_secrets, vec![secret.clone()]);
    let mut n2 = n.clone();
    n2.spec.images.insert(name, spec);
    assert_eq!(
        tag_update(&n2, &j, &[secret], &policy, ts(T0 + 5)).expect("ok"),
        None
    );
}

#[test]
fn tag_update_joins_other_owner_and_bumps_version() {
    let j = job("nginx:1");
    let n = with_tag(ni("a", &[]), "nginx", "1", "other", 7);
    let policy = tag_pull_policy(&j, Jitter::default(), 0);
    let (_, spec) = tag_update(&n, &j, &[], &policy, ts(T0 + 9))
        .expect("ok")
        .expect("changed");
    assert_eq!(spec.tags[0].version, 8);
    assert_eq!(spec.tags[0].owner_references.len(), 2);
    assert_eq!(spec.tags[0].created_at, Some(Time(ts(T0 + 9))));
}

#[test]
fn tag_pull_policy_table() {
    let jit = Jitter {
        always_secs: 7,
        never_secs: 100,
    };
    let mut j = job("a");
    // Always, nothing set: timeout × backoff (600 × 3) + jitter.
    let p = tag_pull_policy(&j, jit, 0);
    assert_eq!(p.ttl_seconds_after_finished, Some(1807));
    assert_eq!(p.active_deadline_seconds, None);
    j.spec.template.pull_policy = Some(PullPolicy {
        timeout_seconds: Some(100),
        backoff_limit: Some(2),
    });
    assert_eq!(
        tag_pull_policy(&j, jit, 10).ttl_seconds_after_finished,
        Some(217)
    );
    j.spec.template.completion_policy.active_deadline_seconds = Some(50);
    let p = tag_pull_policy(&j, jit, 0);
    assert_eq!(
        (p.ttl_seconds_after_finished, p.active_deadline_seconds),
        (Some(57), Some(50))
    );
    j.spec.template.completion_policy.ttl_seconds_after_finished = Some(20);
    assert_eq!(
        tag_pull_policy(&j, jit, 0).ttl_seconds_after_finished,
        Some(27)
    );
    // Never: about a day, deadline 1800 unless the timeout is longer.
    j.spec.template.completion_policy = CompletionPolicy {
        type_: Some(CompletionPolicyType::Never),
        ..Default::default()
    };
    let p = tag_pull_policy(&j, jit, 0);
    assert_eq!(p.ttl_seconds_after_finished, Some(86_400 - 600 + 100));
    assert_eq!(p.active_deadline_seconds, Some(1800));
    j.spec.template.pull_policy = Some(PullPolicy {
        timeout_seconds: Some(3600),
        backoff_limit: None,
    });
    assert_eq!(
        tag_pull_policy(&j, jit, 0).active_deadline_seconds,
        Some(3600)
    );
}

fn copy(name: &str, source: &str, refs: &str) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(name.into());
    s.metadata.annotations = Some(
        [
            (
                keys::IMAGEPULLJOB_SECRET_SOURCE_KEY_ANNOTATION.to_string(),
                source.to_string(),
            ),
            (
                keys::IMAGEPULLJOB_SECRET_REFERENCES_ANNOTATION.to_string(),
                refs.to_string(),
            ),
        ]
        .into(),
    );
    s
}

#[test]
fn classify_secrets_claims_reuses_and_releases() {
    let mut j = job("a");
    j.spec.template.pull_secrets = vec!["s1".into(), "s2".into(), "s3".into()];
    let copies = vec![
        copy("s1-b", "ns/s1", "other/x"),
        copy("s1-a", "ns/s1", "ns/j"),
        copy("s2-a", "ns/s2", "other/y"),
        copy("old-a", "ns/old", "ns/j,other/z"),
        copy("unrelated", "ns/zzz", "other/q"),
    ];
    let plan = classify_secrets(&j, false, &copies);
    let picked: Vec<(String, Option<String>)> = plan
        .claim
        .iter()
        .map(|(k, v)| (k.name.clone(), v.as_ref().map(|s| s.name_any())))
        .collect();
    assert_eq!(
        picked,
        vec![
            ("s1".to_string(), Some("s1-a".to_string())),
            ("s2".to_string(), Some("s2-a".to_string())),
            ("s3".to_string(), None),
        ]
    );
    assert_eq!(
        plan.release
            .iter()
            .map(|s| s.name_any())
            .collect::<Vec<_>>(),
        vec!["old-a"]
    );

    let finished = classify_secrets(&j, true, &copies);
    assert!(finished.claim.is_empty());
    assert_eq!(
        finished
            .release
            .iter()
            .map(|s| s.name_any())
            .collect::<Vec<_>>(),
        vec!["old-a", "s1-a"]
    );
}

#[test]
fn new_copy_records_source_job_and_mode() {
    let mut src = Secret::default();
    src.metadata.name = Some("s1".into());
    src.metadata.namespace = Some("ns".into());
    src.type_ = Some("kubernetes.io/dockerconfigjson".into());
    let c = new_copy(&src, "kruise-daemon-config", "ns/j", "abc123");
    assert_eq!(c.name_any(), "s1-abc123");
    assert_eq!(c.namespace().as_deref(), Some("kruise-daemon-config"));
    assert_eq!(referencing_jobs(&c), ["ns/j".to_string()].into());
    assert_eq!(source_of(&c), ReferenceObject::parse("ns/s1"));
    assert_eq!(
        c.annotations()
            .get(keys::IMAGEPULLJOB_SECRET_MODE_ANNOTATION)
            .map(String::as_str),
        Some(ReferenceObject::MODE_BATCH)
    );
    assert_eq!(c.type_, src.type_);
    assert_eq!(
        references_value(&["b/x".to_string(), "a/y".to_string()].into()),
        "a/y,b/x"
    );
}

#[test]
fn event_routing() {
    let n = ni("n1", &[("zone", "a")]);
    let mut j = job("a");
    assert!(job_may_target(&j, &n, &[]));
    j.spec.template.selector = Some(ImagePullJobNodeSelector {
        names: vec!["n2".into()],
        ..Default::default()
    });
    assert!(!job_may_target(&j, &n, &[]));
    j.spec.template.selector = None;
    j.spec.template.pod_selector = Some(ImagePullJobPodSelector {
        match_labels: [("app".to_string(), "web".to_string())].into(),
        ..Default::default()
    });
    assert!(!job_may_target(&j, &n, &[]));
    assert!(job_may_target(
        &j,
        &n,
        &[pod("p", "n1", "web", T0, "Running")]
    ));
}

/// The selector rules are apimachinery's (`LabelSelectorAsSelector`); an empty key, which the
/// old copy let through, is refused too.
#[test]
fn validate_selector_table() {
    let sel = |key: &str, op: &str, values: Option<Vec<&str>>| LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.map(|v| v.into_iter().map(String::from).collect()),
        }]),
        ..Default::default()
    };
    let cases = [
        ("In with values", sel("zone", "In", Some(vec!["a"])), true),
        ("In without values", sel("zone", "In", None), false),
        (
            "NotIn with values",
            sel("zone", "NotIn", Some(vec!["a"])),
            true,
        ),
        ("Exists", sel("zone", "Exists", None), true),
        (
            "Exists with values",
            sel("zone", "Exists", Some(vec!["a"])),
            false,
        ),
        ("DoesNotExist", sel("zone", "DoesNotExist", None), true),
        ("unknown operator", sel("zone", "Bogus", None), false),
        ("empty key", sel("", "Exists", None), false),
        ("no expressions", LabelSelector::default(), true),
    ];
    for (what, s, ok) in cases {
        assert_eq!(validate_selector(&s, "selector").is_ok(), ok, "{what}");
    }
}
