use super::*;
use crate::inplace::batches::{self, Batch, PreCheckPending};
use k8s_openapi::api::core::v1::ConfigMapKeySelector;
use std::collections::BTreeSet;

fn barrier(c: Container, key: &str) -> Container {
    with_env(
        c,
        EnvVar {
            name: keys::ENV_CONTAINER_BARRIER.into(),
            value_from: Some(EnvVarSource {
                config_map_key_ref: Some(ConfigMapKeySelector {
                    name: "cs-abcde-barrier".into(),
                    key: key.into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn meta(labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

#[test]
fn priorities_from_each_source() {
    // Barrier env (what the webhook injects) wins.
    let p = pod(vec![
        barrier(container("a", "x"), "p_10"),
        barrier(container("b", "x"), "p_-5"),
        container("c", "x"),
    ]);
    assert_eq!(
        batches::container_priorities(&p),
        vec![
            ("a".to_string(), Some(10)),
            ("b".to_string(), Some(-5)),
            ("c".to_string(), None)
        ]
    );
    // KRUISE_CONTAINER_PRIORITY as the webhook would read it: unset counts as 0.
    let p = pod(vec![
        with_env(container("a", "x"), priority_env(1)),
        container("b", "x"),
    ]);
    assert_eq!(
        batches::container_priorities(&p),
        vec![("a".to_string(), Some(1)), ("b".to_string(), Some(0))]
    );
    // All equal: no ordering.
    let p = pod(vec![
        with_env(container("a", "x"), priority_env(3)),
        with_env(container("b", "x"), priority_env(3)),
    ]);
    assert_eq!(
        batches::container_priorities(&p),
        vec![("a".to_string(), None), ("b".to_string(), None)]
    );
    // Ordered annotation: the spec order.
    let mut p = pod(vec![
        container("a", "x"),
        container("b", "x"),
        container("c", "x"),
    ]);
    set_annotation(
        &mut p,
        keys::CONTAINER_LAUNCH_PRIORITY_ANNOTATION,
        keys::CONTAINER_LAUNCH_PRIORITY_ORDERED,
    );
    assert_eq!(
        batches::container_priorities(&p),
        vec![
            ("a".to_string(), Some(0)),
            ("b".to_string(), Some(-1)),
            ("c".to_string(), Some(-2))
        ]
    );
    // One container: never ordered.
    let mut p = pod(vec![with_env(container("a", "x"), priority_env(5))]);
    set_annotation(
        &mut p,
        keys::CONTAINER_LAUNCH_PRIORITY_ANNOTATION,
        keys::CONTAINER_LAUNCH_PRIORITY_ORDERED,
    );
    assert_eq!(
        batches::container_priorities(&p),
        vec![("a".to_string(), None)]
    );
}

#[test]
fn batch_table() {
    let no_meta = BTreeMap::new();
    // (name, pod containers, changed, ref metadata, now, later)
    type Case = (
        &'static str,
        Vec<Container>,
        Vec<&'static str>,
        BTreeMap<String, ObjectMeta>,
        Vec<&'static str>,
        Vec<&'static str>,
    );
    let cases: Vec<Case> = vec![
        (
            "single container",
            vec![container("a", "x")],
            vec!["a"],
            no_meta.clone(),
            vec!["a"],
            vec![],
        ),
        (
            "no priorities: all at once",
            vec![container("a", "x"), container("b", "x")],
            vec!["a", "b"],
            no_meta.clone(),
            vec!["a", "b"],
            vec![],
        ),
        (
            "highest first",
            vec![
                barrier(container("a", "x"), "p_1"),
                barrier(container("b", "x"), "p_2"),
                barrier(container("c", "x"), "p_3"),
            ],
            vec!["a", "b", "c"],
            no_meta.clone(),
            vec!["c"],
            vec!["a", "b"],
        ),
        (
            "ties go together",
            vec![
                barrier(container("a", "x"), "p_2"),
                barrier(container("b", "x"), "p_2"),
                barrier(container("c", "x"), "p_1"),
            ],
            vec!["a", "b", "c"],
            no_meta.clone(),
            vec!["a", "b"],
            vec!["c"],
        ),
        (
            "unchanged high priority does not block",
            vec![
                barrier(container("a", "x"), "p_9"),
                barrier(container("b", "x"), "p_1"),
                barrier(container("c", "x"), "p_0"),
            ],
            vec!["b", "c"],
            no_meta.clone(),
            vec!["b"],
            vec!["c"],
        ),
        (
            "containers without priority join the first batch",
            vec![
                barrier(container("a", "x"), "p_1"),
                barrier(container("b", "x"), "p_0"),
                container("c", "x"),
            ],
            vec!["a", "b", "c"],
            no_meta.clone(),
            vec!["a", "c"],
            vec!["b"],
        ),
        (
            "shared label pulls a lower priority container in",
            vec![
                barrier(container("a", "x"), "p_2"),
                barrier(container("b", "x"), "p_1"),
                barrier(container("c", "x"), "p_0"),
            ],
            vec!["a", "b", "c"],
            BTreeMap::from([
                ("a".to_string(), meta(&[("v", "2")])),
                ("b".to_string(), meta(&[("v", "2"), ("w", "3")])),
                ("c".to_string(), meta(&[("w", "3")])),
            ]),
            // b shares v with a; c shares w with b: transitively all three.
            vec!["a", "b", "c"],
            vec![],
        ),
        (
            "unknown names are ignored",
            vec![container("a", "x")],
            vec!["a", "ghost"],
            no_meta.clone(),
            vec!["a"],
            vec![],
        ),
    ];
    for (name, containers, changed, ref_meta, now, later) in cases {
        let p = pod(containers);
        let got = batches::plan(&p, &names(&changed), &ref_meta);
        assert_eq!(
            got,
            Batch {
                now: names(&now),
                later: names(&later)
            },
            "{name}"
        );
    }
}

#[test]
fn pre_check_before_next() {
    let mut p = pod(vec![container("a", "x"), container("b", "x")]);
    assert_eq!(batches::pre_check_before_next(&p, &[]), Ok(()));
    assert_eq!(batches::pre_check_before_next(&p, &["a".into()]), Ok(()));
    if let Some(s) = p
        .status
        .as_mut()
        .and_then(|s| s.container_statuses.as_mut())
    {
        s[1].ready = false;
    }
    assert_eq!(
        batches::pre_check_before_next(&p, &["a".into(), "b".into()]),
        Err(PreCheckPending::NotReady("b".into()))
    );
    assert_eq!(
        batches::pre_check_before_next(&p, &["z".into()]),
        Err(PreCheckPending::NotFound("z".into()))
    );
}

/// A pod the webhook would have refused (a priority that is not an integer) is not ordered:
/// upstream reads only the barrier env, which such a pod never got.
#[test]
fn invalid_declared_priority_means_no_ordering() {
    let bad = EnvVar {
        name: keys::ENV_CONTAINER_PRIORITY.into(),
        value: Some("high".into()),
        ..Default::default()
    };
    let p = pod(vec![
        with_env(container("a", "x"), bad),
        with_env(container("b", "x"), priority_env(5)),
    ]);
    assert_eq!(
        batches::container_priorities(&p),
        vec![("a".to_string(), None), ("b".to_string(), None)]
    );
    let b = batches::plan(&p, &names(&["a", "b"]), &BTreeMap::new());
    assert_eq!(b.now, names(&["a", "b"]));
    assert!(b.later.is_empty());
    // A barrier key that does not parse still orders the container, at 0 (upstream).
    let p = pod(vec![
        barrier(container("a", "x"), "p_x"),
        barrier(container("b", "x"), "p_3"),
    ]);
    assert_eq!(
        batches::container_priorities(&p),
        vec![("a".to_string(), Some(0)), ("b".to_string(), Some(3))]
    );
}
