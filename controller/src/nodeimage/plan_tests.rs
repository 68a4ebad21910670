use super::*;
use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
use kruise_api::apps::v1beta1::{ImageTagPullPolicy, ImageTagSpec, NodeImageSpec};

const T0: i64 = 1_700_000_000;

fn ts(s: i64) -> Timestamp {
    Timestamp::from_second(s).expect("ts")
}

fn node(ready: Option<(&str, i64)>) -> Node {
    Node {
        status: Some(NodeStatus {
            conditions: ready.map(|(s, at)| {
                vec![NodeCondition {
                    type_: "Ready".into(),
                    status: s.into(),
                    last_transition_time: Some(Time(ts(at))),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn creation_waits_for_ready_plus_delay() {
    let cases = [
        (None, T0, Creation::NotReady),
        (Some(("False", T0)), T0 + 100, Creation::NotReady),
        (
            Some(("True", T0)),
            T0 + 10,
            Creation::After(Duration::from_secs(20)),
        ),
        (Some(("True", T0)), T0 + 30, Creation::Now),
        (Some(("True", T0)), T0 + 300, Creation::Now),
    ];
    for (ready, now, want) in cases {
        assert_eq!(creation(&node(ready), ts(now)), want, "{ready:?} at {now}");
    }
}

fn job_ref(name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(keys::APPS_V1BETA1.into()),
        kind: Some("ImagePullJob".into()),
        namespace: Some("ns".into()),
        name: Some(name.into()),
        uid: Some(uid.into()),
        ..Default::default()
    }
}

fn tag(
    t: &str,
    owners: Vec<ObjectReference>,
    ttl: Option<i32>,
    deadline: Option<i64>,
) -> ImageTagSpec {
    ImageTagSpec {
        tag: t.into(),
        created_at: Some(Time(ts(T0))),
        owner_references: owners,
        version: 1,
        pull_policy: Some(ImageTagPullPolicy {
            ttl_seconds_after_finished: ttl,
            active_deadline_seconds: deadline,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn ni(
    images: Vec<(&str, Vec<ImageTagSpec>)>,
    statuses: Vec<(&str, Vec<ImageTagStatus>)>,
) -> NodeImage {
    let mut n = NodeImage::new(
        "n1",
        NodeImageSpec {
            images: images
                .into_iter()
                .map(|(k, tags)| {
                    (
                        k.to_string(),
                        ImageSpec {
                            tags,
                            ..Default::default()
                        },
                    )
                })
                .collect(),
        },
    );
    n.status = Some(NodeImageStatus {
        image_statuses: statuses
            .into_iter()
            .map(|(k, tags)| (k.to_string(), ImageStatus { tags }))
            .collect(),
        ..Default::default()
    });
    n
}

fn st(t: &str, phase: ImagePullPhase, version: i64, done: Option<i64>) -> ImageTagStatus {
    ImageTagStatus {
        tag: t.into(),
        phase,
        version,
        completion_time: done.map(|d| Time(ts(d))),
        ..Default::default()
    }
}

fn lookup(r: &ObjectReference) -> Owner {
    match r.name.as_deref() {
        Some("alive") => Owner::Exists("u1".into()),
        Some("recreated") => Owner::Exists("other".into()),
        Some("flaky") => Owner::Unknown,
        _ => Owner::Gone,
    }
}

#[test]
fn clean_spec_drops_gone_owners_and_expired_tags() {
    let n = ni(
        vec![
            (
                "a",
                vec![tag(
                    "1",
                    vec![job_ref("alive", "u1"), job_ref("gone", "u2")],
                    None,
                    None,
                )],
            ),
            ("b", vec![tag("1", vec![job_ref("gone", "u2")], None, None)]),
            (
                "c",
                vec![tag("1", vec![job_ref("recreated", "u1")], None, None)],
            ),
            (
                "d",
                vec![tag("1", vec![job_ref("flaky", "u1")], None, None)],
            ),
            (
                "e",
                vec![
                    tag("1", vec![job_ref("alive", "u1")], Some(100), None),
                    tag("2", vec![job_ref("alive", "u1")], Some(100), None),
                ],
            ),
        ],
        vec![(
            "e",
            vec![
                st("1", ImagePullPhase::Succeeded, 1, Some(T0)),
                st("2", ImagePullPhase::Succeeded, 1, Some(T0 + 50)),
            ],
        )],
    );
    let out = clean_spec(&n, &lookup, &|_| true, ts(T0 + 120));
    let images = out.images.expect("modified");
    assert_eq!(
        images.keys().cloned().collect::<Vec<_>>(),
        vec!["a", "d", "e"]
    );
    assert_eq!(images["a"].tags[0].owner_references.len(), 1);
    assert_eq!(images["e"].tags.len(), 1);
    assert_eq!(images["e"].tags[0].tag, "2");
    assert_eq!(out.requeue, Some(Duration::from_secs(30)));
}

#[test]
fn clean_spec_unchanged_and_secret_cleanup() {
    let mut n = ni(
        vec![(
            "a",
            vec![tag("1", vec![job_ref("alive", "u1")], None, None)],
        )],
        vec![],
    );
    assert_eq!(clean_spec(&n, &lookup, &|_| true, ts(T0)).images, None);
    n.spec.images.get_mut("a").expect("a").pull_secrets = vec![
        ReferenceObject {
            namespace: "cfg".into(),
            name: "old".into(),
            mode: String::new(),
        },
        ReferenceObject {
            namespace: "cfg".into(),
            name: "new".into(),
            mode: ReferenceObject::MODE_BATCH.into(),
        },
    ];
    let out = clean_spec(&n, &lookup, &|_| false, ts(T0));
    let secrets = &out.images.expect("modified")["a"].pull_secrets;
    assert_eq!(secrets.len(), 1);
    assert_eq!(secrets[0].name, "new");
    // A tag without createdAt is dropped.
    let mut n = ni(
        vec![(
            "a",
            vec![tag("1", vec![job_ref("alive", "u1")], None, None)],
        )],
        vec![],
    );
    n.spec.images.get_mut("a").expect("a").tags[0].created_at = None;
    assert_eq!(
        clean_spec(&n, &lookup, &|_| true, ts(T0)).images,
        Some(BTreeMap::new())
    );
}

/// (status of the tag, deadline, now, expected failure message, expected requeue secs)
type Case = (
    Option<ImageTagStatus>,
    Option<i64>,
    i64,
    Option<&'static str>,
    Option<u64>,
);

#[test]
fn status_timeouts_table() {
    let owners = vec![job_ref("alive", "u1")];
    // (status of the tag, now, expected phase/message or None, requeue)
    let cases: Vec<Case> = vec![
        (None, None, T0 + 60, None, Some(540)),
        (None, None, T0 + 600, Some(MSG_NOT_RESPONDED), None),
        (
            Some(st("1", ImagePullPhase::Pulling, 0, None)),
            None,
            T0 + 601,
            Some(MSG_NOT_RESPONDED),
            None,
        ),
        (
            Some(st("1", ImagePullPhase::Pulling, 1, None)),
            None,
            T0 + 10_000,
            None,
            None,
        ),
        (
            Some(st("1", ImagePullPhase::Pulling, 1, None)),
            Some(60),
            T0 + 600,
            None,
            Some(60),
        ),
        (
            Some(st("1", ImagePullPhase::Pulling, 1, None)),
            Some(60),
            T0 + 660,
            Some(MSG_DEADLINE),
            None,
        ),
        (
            Some(st("1", ImagePullPhase::Succeeded, 1, Some(T0))),
            Some(60),
            T0 + 9_999,
            None,
            None,
        ),
    ];
    for (i, (status, deadline, now, want, requeue)) in cases.into_iter().enumerate() {
        let n = ni(
            vec![("a", vec![tag("1", owners.clone(), None, deadline)])],
            status.map(|s| vec![("a", vec![s])]).unwrap_or_default(),
        );
        let out = status_timeouts(&n, ts(now));
        match want {
            None => assert_eq!(out.status, None, "case {i}"),
            Some(msg) => {
                let s = out.status.expect("status");
                let t = &s.image_statuses["a"].tags[0];
                assert_eq!(t.message, msg, "case {i}");
                assert_eq!(t.phase, ImagePullPhase::Failed);
                assert_eq!(t.version, 1);
                assert_eq!((s.desired, s.failed), (1, 1));
                assert_eq!(out.failed.len(), 1);
                assert_eq!(out.failed[0].owners, owners);
            }
        }
        assert_eq!(out.requeue, requeue.map(Duration::from_secs), "case {i}");
    }
}

#[test]
fn status_drops_tags_not_in_spec_when_rewriting() {
    let n = ni(
        vec![("a", vec![tag("1", vec![], None, None)])],
        vec![
            ("a", vec![st("0", ImagePullPhase::Succeeded, 1, Some(T0))]),
            (
                "gone",
                vec![st("1", ImagePullPhase::Succeeded, 1, Some(T0))],
            ),
        ],
    );
    let s = status_timeouts(&n, ts(T0 + 700)).status.expect("status");
    assert_eq!(s.image_statuses.len(), 1);
    assert_eq!(s.image_statuses["a"].tags.len(), 1);
    assert_eq!(s.image_statuses["a"].tags[0].tag, "1");
    assert_eq!((s.desired, s.succeeded, s.failed), (1, 0, 1));
}
