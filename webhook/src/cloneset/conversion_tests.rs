//! Conversion round trips: exact for every generated object in either version.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::conversion::convert;
use kruise_api::keys;

const ALPHA: &str = "apps.kruise.io/v1alpha1";
const BETA: &str = "apps.kruise.io/v1beta1";

fn opt<T: std::fmt::Debug + Clone + 'static>(
    s: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<Option<T>> {
    prop_oneof![Just(None), s.prop_map(Some)].boxed()
}

fn int_or_str() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-3i64..20).prop_map(|i| json!(i)),
        (0u32..120).prop_map(|p| json!(format!("{p}%"))),
        Just(json!("7")),
        Just(Value::Null),
    ]
}

fn one_of(xs: &'static [&'static str]) -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![Just(None), proptest::sample::select(xs).prop_map(Some)]
}

fn bool_field() -> impl Strategy<Value = Option<bool>> {
    prop_oneof![Just(None), any::<bool>().prop_map(Some)]
}

fn insert_opt(m: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v {
        m.insert(k.to_owned(), v);
    }
}

/// Rolling fields shared by both versions; `beta` adds the pre-download fields.
fn rolling_fields(beta: bool) -> impl Strategy<Value = Map<String, Value>> {
    (
        opt(int_or_str()),
        opt(int_or_str()),
        opt(int_or_str()),
        bool_field(),
        opt((
            opt(0i64..60),
            opt(int_or_str()),
            opt(0i64..900),
            opt(0i64..5),
        )),
        opt(Just(json!({"orderPriority": [{"orderedKey": "k"}]}))),
        opt(Just(json!([{"key": "zone", "value": "a"}]))),
        opt(Just(json!("unknown-field-value"))),
    )
        .prop_map(move |(p, mu, ms, paused, ips, prio, scatter, unknown)| {
            let mut m = Map::new();
            insert_opt(&mut m, "partition", p);
            insert_opt(&mut m, "maxUnavailable", mu);
            insert_opt(&mut m, "maxSurge", ms);
            insert_opt(&mut m, "paused", paused.map(Value::Bool));
            if let Some((grace, par, timeout, min)) = ips {
                let mut i = Map::new();
                insert_opt(&mut i, "gracePeriodSeconds", grace.map(|g| json!(g)));
                if beta {
                    insert_opt(&mut i, "imagePreDownloadParallelism", par);
                    insert_opt(
                        &mut i,
                        "imagePreDownloadTimeoutSeconds",
                        timeout.map(|t| json!(t)),
                    );
                    insert_opt(
                        &mut i,
                        "imagePreDownloadMinUpdatedReadyPods",
                        min.map(|t| json!(t)),
                    );
                }
                m.insert("inPlaceUpdateStrategy".to_owned(), Value::Object(i));
            }
            insert_opt(&mut m, "priorityStrategy", prio);
            insert_opt(&mut m, "scatterStrategy", scatter);
            insert_opt(&mut m, "futureField", unknown);
            m
        })
}

fn metadata() -> impl Strategy<Value = Value> {
    (
        opt((one_of(&["true", "false"]), bool_field())),
        opt((
            one_of(&["3", "abc", "", "50%"]),
            one_of(&["600", "x"]),
            one_of(&["2", "-1"]),
            bool_field(),
        )),
    )
        .prop_map(|(labels, anns)| {
            let mut meta = Map::new();
            meta.insert("name".to_owned(), json!("cs"));
            meta.insert("namespace".to_owned(), json!("default"));
            if let Some((exclude, other)) = labels {
                let mut l = Map::new();
                insert_opt(
                    &mut l,
                    keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_LABEL,
                    exclude.map(|v| json!(v)),
                );
                if other == Some(true) {
                    l.insert("app".to_owned(), json!("a"));
                }
                meta.insert("labels".to_owned(), Value::Object(l));
            }
            if let Some((par, timeout, min, other)) = anns {
                let mut a = Map::new();
                insert_opt(
                    &mut a,
                    keys::IMAGE_PREDOWNLOAD_PARALLELISM_ANNOTATION,
                    par.map(|v| json!(v)),
                );
                insert_opt(
                    &mut a,
                    keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_ANNOTATION,
                    timeout.map(|v| json!(v)),
                );
                insert_opt(
                    &mut a,
                    keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_ANNOTATION,
                    min.map(|v| json!(v)),
                );
                if other == Some(true) {
                    a.insert("note".to_owned(), json!("hello"));
                }
                meta.insert("annotations".to_owned(), Value::Object(a));
            }
            Value::Object(meta)
        })
}

fn common_spec() -> impl Strategy<Value = Map<String, Value>> {
    (opt(0i64..10), opt(0i64..20), bool_field()).prop_map(|(replicas, rhl, vct)| {
        let mut s = Map::new();
        insert_opt(&mut s, "replicas", replicas.map(|r| json!(r)));
        insert_opt(&mut s, "revisionHistoryLimit", rhl.map(|r| json!(r)));
        s.insert("selector".to_owned(), json!({"matchLabels": {"app": "a"}}));
        s.insert(
            "template".to_owned(),
            json!({"metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
        );
        if vct == Some(true) {
            s.insert(
                "volumeClaimTemplates".to_owned(),
                json!([{"metadata": {"name": "data"}}]),
            );
        }
        s
    })
}

fn status() -> impl Strategy<Value = Option<Value>> {
    opt((0i64..5, any::<bool>()).prop_map(|(r, cond)| {
        let mut s = json!({"replicas": r, "readyReplicas": r, "updatedReplicas": 0,
            "updatedReadyReplicas": 0, "updateRevision": "cs-1", "labelSelector": "app=a"});
        if cond {
            s["conditions"] = json!([{"type": "FailedScale", "status": "True", "reason": "x"}]);
        }
        s
    }))
}

fn alpha_cloneset() -> impl Strategy<Value = Value> {
    (
        metadata(),
        common_spec(),
        opt((
            one_of(&[
                "ReCreate",
                "InPlaceIfPossible",
                "InPlaceOnly",
                "OnDelete",
                "Weird",
            ]),
            rolling_fields(false),
        )),
        opt((opt(Just(json!(["p1"]))), opt(int_or_str()), bool_field())),
        status(),
    )
        .prop_map(|(meta, mut spec, us, ss, status)| {
            if let Some((ty, mut fields)) = us {
                insert_opt(&mut fields, "type", ty.map(|t| json!(t)));
                spec.insert("updateStrategy".to_owned(), Value::Object(fields));
            }
            if let Some((ptd, mu, disable)) = ss {
                let mut m = Map::new();
                insert_opt(&mut m, "podsToDelete", ptd);
                insert_opt(&mut m, "maxUnavailable", mu);
                insert_opt(&mut m, "disablePVCReuse", disable.map(Value::Bool));
                spec.insert("scaleStrategy".to_owned(), Value::Object(m));
            }
            let mut cs = json!({"apiVersion": ALPHA, "kind": "CloneSet", "metadata": meta,
                "spec": spec});
            if let Some(s) = status {
                cs["status"] = s;
            }
            cs
        })
}

fn beta_cloneset() -> impl Strategy<Value = Value> {
    (
        metadata(),
        common_spec(),
        opt((
            one_of(&["RollingUpdate", "OnDelete", "", "Weird"]),
            opt((
                one_of(&["ReCreate", "InPlaceIfPossible", "InPlaceOnly", "", "Weird"]),
                rolling_fields(true),
            )),
        )),
        opt((
            opt(Just(json!(["p1"]))),
            opt(int_or_str()),
            bool_field(),
            bool_field(),
        )),
        status(),
    )
        .prop_map(|(meta, mut spec, us, ss, status)| {
            if let Some((ty, ru)) = us {
                let mut m = Map::new();
                insert_opt(&mut m, "type", ty.map(|t| json!(t)));
                if let Some((policy, mut fields)) = ru {
                    insert_opt(&mut fields, "podUpdatePolicy", policy.map(|p| json!(p)));
                    m.insert("rollingUpdate".to_owned(), Value::Object(fields));
                }
                spec.insert("updateStrategy".to_owned(), Value::Object(m));
            }
            if let Some((ptd, mu, enable, exclude)) = ss {
                let mut m = Map::new();
                insert_opt(&mut m, "podsToDelete", ptd);
                insert_opt(&mut m, "maxUnavailable", mu);
                insert_opt(&mut m, "enablePVCReuse", enable.map(Value::Bool));
                insert_opt(&mut m, "excludePreparingDelete", exclude.map(Value::Bool));
                spec.insert("scaleStrategy".to_owned(), Value::Object(m));
            }
            let mut cs = json!({"apiVersion": BETA, "kind": "CloneSet", "metadata": meta,
                "spec": spec});
            if let Some(s) = status {
                cs["status"] = s;
            }
            cs
        })
}

fn other(v: &str) -> &'static str {
    if v == ALPHA { BETA } else { ALPHA }
}

fn check_round_trip(x: &Value) -> Result<(), TestCaseError> {
    let own = x["apiVersion"].as_str().unwrap_or_default().to_owned();
    let y = convert(x, other(&own)).map_err(TestCaseError::fail)?;
    prop_assert_eq!(y["apiVersion"].as_str(), Some(other(&own)));
    let back = convert(&y, &own).map_err(TestCaseError::fail)?;
    prop_assert_eq!(&back, x, "round trip via {}", y);
    prop_assert_eq!(&convert(x, &own).map_err(TestCaseError::fail)?, x);
    // And the converted form is stable too.
    let y2 = convert(&back, other(&own)).map_err(TestCaseError::fail)?;
    prop_assert_eq!(y2, y);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn alpha_round_trips_exactly(x in alpha_cloneset()) {
        check_round_trip(&x)?;
    }

    #[test]
    fn beta_round_trips_exactly(x in beta_cloneset()) {
        check_round_trip(&x)?;
    }
}

#[test]
fn defaulted_objects_need_no_record() {
    let alpha = json!({"apiVersion": ALPHA, "kind": "CloneSet", "metadata": {"name": "cs"},
        "spec": {"replicas": 1, "scaleStrategy": {},
            "updateStrategy": {"type": "InPlaceIfPossible", "partition": 0,
            "maxUnavailable": "20%", "maxSurge": 0, "inPlaceUpdateStrategy": {}}}});
    let beta = convert(&alpha, BETA).expect("convert");
    assert_eq!(
        beta["spec"],
        json!({"replicas": 1,
            "scaleStrategy": {"enablePVCReuse": true},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                "podUpdatePolicy": "InPlaceIfPossible", "partition": 0,
                "maxUnavailable": "20%", "maxSurge": 0, "inPlaceUpdateStrategy": {}}}})
    );
    assert!(beta["metadata"].get("annotations").is_none());
}

#[test]
fn beta_only_fields_are_kept_in_the_record_and_come_back() {
    let beta = json!({"apiVersion": BETA, "kind": "CloneSet", "metadata": {"name": "cs"},
        "spec": {"scaleStrategy": {"enablePVCReuse": false, "excludePreparingDelete": true},
            "updateStrategy": {"type": "OnDelete", "rollingUpdate": {"podUpdatePolicy": "InPlaceOnly"}}}});
    let alpha = convert(&beta, ALPHA).expect("to alpha");
    assert_eq!(alpha["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
    assert_eq!(
        alpha["metadata"]["labels"][keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_LABEL],
        "true"
    );
    assert!(alpha["metadata"]["annotations"][keys::CLONESET_CONVERSION_ANNOTATION].is_string());
    assert_eq!(convert(&alpha, BETA).expect("back"), beta);
}

#[test]
fn edits_made_in_the_other_version_win_over_the_record() {
    let beta = json!({"apiVersion": BETA, "kind": "CloneSet", "metadata": {"name": "cs"},
        "spec": {"scaleStrategy": {"enablePVCReuse": true},
            "updateStrategy": {"type": "OnDelete", "rollingUpdate": {"podUpdatePolicy": "InPlaceOnly"}}}});
    let mut alpha = convert(&beta, ALPHA).expect("to alpha");
    alpha["spec"]["updateStrategy"] = json!({"type": "InPlaceIfPossible", "partition": 3});
    let back = convert(&alpha, BETA).expect("back");
    assert_eq!(
        back["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 3,
            "podUpdatePolicy": "InPlaceIfPossible"}})
    );
    assert!(
        back["metadata"]
            .get("annotations")
            .and_then(|a| a.get(keys::CLONESET_CONVERSION_ANNOTATION))
            .is_none()
    );
}

#[test]
fn predownload_annotations_become_fields() {
    let alpha = json!({"apiVersion": ALPHA, "kind": "CloneSet",
        "metadata": {"name": "cs", "annotations": {
            keys::IMAGE_PREDOWNLOAD_PARALLELISM_ANNOTATION: "5",
            keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_ANNOTATION: "300"}},
        "spec": {"updateStrategy": {"type": "InPlaceIfPossible", "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}}}});
    let beta = convert(&alpha, BETA).expect("convert");
    assert_eq!(
        beta["spec"]["updateStrategy"]["rollingUpdate"]["inPlaceUpdateStrategy"],
        json!({"gracePeriodSeconds": 10, "imagePreDownloadParallelism": 5,
            "imagePreDownloadTimeoutSeconds": 300})
    );
    assert_eq!(convert(&beta, ALPHA).expect("back"), alpha);
}

#[test]
fn rejects_foreign_versions() {
    let obj = json!({"apiVersion": "apps/v1", "kind": "CloneSet"});
    assert!(convert(&obj, BETA).is_err());
    let obj = json!({"apiVersion": ALPHA, "kind": "CloneSet"});
    assert!(convert(&obj, "apps.kruise.io/v2").is_err());
}
