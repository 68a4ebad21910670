//! Advanced StatefulSet v1alpha1 ⇄ v1beta1 conversion, after upstream's
//! `apis/apps/v1alpha1/statefulset_conversion.go`: v1alpha1 is v1beta1 less the fields v1beta1
//! added (`reserveOrdinals`, `lifecycle`, `scaleStrategy`, `ordinals`,
//! `persistentVolumeClaimRetentionPolicy`, `volumeClaimUpdateStrategy`, and
//! `status.updatedReadyReplicas`, `updatedAvailableReplicas`, `volumeClaims`). Upstream's
//! v1beta1 → v1alpha1 drops them; so does ours, and the generic engine keeps what was dropped in
//! its record, so a v1beta1 object read and written back as v1alpha1 keeps them (exact round trip).

use serde_json::Value;

use crate::conversion::scheme::{Owned, Scheme};

/// `spec` fields only v1beta1 has.
const BETA_ONLY_SPEC: &[&str] = &[
    "reserveOrdinals",
    "lifecycle",
    "scaleStrategy",
    "ordinals",
    "persistentVolumeClaimRetentionPolicy",
    "volumeClaimUpdateStrategy",
];

/// `status` fields only v1beta1 has.
const BETA_ONLY_STATUS: &[&str] = &[
    "updatedReadyReplicas",
    "updatedAvailableReplicas",
    "volumeClaims",
];

const OWNED: &[Owned] = &[
    Owned::Value(&["spec", "reserveOrdinals"]),
    Owned::Value(&["spec", "lifecycle"]),
    Owned::Value(&["spec", "scaleStrategy"]),
    Owned::Value(&["spec", "ordinals"]),
    Owned::Value(&["spec", "persistentVolumeClaimRetentionPolicy"]),
    Owned::Value(&["spec", "volumeClaimUpdateStrategy"]),
    Owned::Value(&["status", "updatedReadyReplicas"]),
    Owned::Value(&["status", "updatedAvailableReplicas"]),
    Owned::Value(&["status", "volumeClaims"]),
    Owned::Shape(&["spec"]),
    Owned::Shape(&["status"]),
    Owned::Shape(&["metadata", "annotations"]),
];

/// StatefulSet v1alpha1 ⇄ v1beta1.
pub const SCHEME: Scheme = Scheme::apps(map_to_v1beta1, map_to_v1alpha1, OWNED);

/// Converts one Advanced StatefulSet to `desired`.
pub fn convert(obj: &Value, desired: &str) -> Result<Value, String> {
    SCHEME.convert(obj, desired)
}

/// Plain v1alpha1 → v1beta1: every v1alpha1 field has the same name and meaning in v1beta1.
fn map_to_v1beta1(src: &Value) -> Value {
    src.clone()
}

/// Plain v1beta1 → v1alpha1: the fields v1alpha1 lacks are dropped, as upstream's.
fn map_to_v1alpha1(src: &Value) -> Value {
    let mut out = src.clone();
    for (part, fields) in [("spec", BETA_ONLY_SPEC), ("status", BETA_ONLY_STATUS)] {
        if let Some(m) = out.get_mut(part).and_then(Value::as_object_mut) {
            for f in fields {
                m.remove(*f);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_api::keys;
    use proptest::prelude::*;
    use serde_json::json;

    const ALPHA: &str = "apps.kruise.io/v1alpha1";
    const BETA: &str = "apps.kruise.io/v1beta1";

    fn beta() -> Value {
        json!({"apiVersion": BETA, "kind": "StatefulSet",
            "metadata": {"name": "s", "annotations": {"a": "b"}},
            "spec": {"replicas": 3, "serviceName": "s", "selector": {"matchLabels": {"app": "s"}},
                "template": {"metadata": {"labels": {"app": "s"}}},
                "reserveOrdinals": [1, "3-4"],
                "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete"},
                "ordinals": {"start": 2},
                "updateStrategy": {"type": "RollingUpdate",
                    "rollingUpdate": {"partition": 1, "podUpdatePolicy": "InPlaceIfPossible"}}},
            "status": {"replicas": 3, "readyReplicas": 3, "updatedReadyReplicas": 2,
                "volumeClaims": [{"volumeClaimName": "data"}]}})
    }

    #[test]
    fn beta_to_alpha_drops_the_beta_fields_as_upstream_and_keeps_them_for_the_way_back() {
        let a = convert(&beta(), ALPHA).expect("converts");
        assert_eq!(a["apiVersion"], ALPHA);
        for f in BETA_ONLY_SPEC {
            assert!(a["spec"].get(*f).is_none(), "spec.{f} left in v1alpha1");
        }
        for f in BETA_ONLY_STATUS {
            assert!(a["status"].get(*f).is_none(), "status.{f} left in v1alpha1");
        }
        assert_eq!(
            a["spec"]["updateStrategy"],
            beta()["spec"]["updateStrategy"]
        );
        assert_eq!(a["status"]["readyReplicas"], 3);
        assert!(
            a["metadata"]["annotations"]
                .get(keys::CLONESET_CONVERSION_ANNOTATION)
                .is_some(),
            "the dropped fields are recorded"
        );
        assert_eq!(convert(&a, BETA).expect("back"), beta());
    }

    #[test]
    fn an_edit_in_v1alpha1_wins_over_the_record() {
        let mut a = convert(&beta(), ALPHA).expect("converts");
        a["spec"]["replicas"] = json!(5);
        let b = convert(&a, BETA).expect("back");
        assert_eq!(b["spec"]["replicas"], 5);
        // The beta-only fields come back: the record's fingerprint covers only what the mapping
        // owns, which the edit did not touch.
        assert_eq!(b["spec"]["reserveOrdinals"], json!([1, "3-4"]));
    }

    #[test]
    fn alpha_to_beta_is_a_relabel() {
        let a = json!({"apiVersion": ALPHA, "kind": "StatefulSet", "metadata": {"name": "s"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "s"}}, "template": {},
                "updateStrategy": {"rollingUpdate": {"paused": true,
                "unorderedUpdate": {"priorityStrategy": {"weightPriority": []}}}}},
            "status": {"replicas": 1}});
        let b = convert(&a, BETA).expect("converts");
        let mut expect = a.clone();
        expect["apiVersion"] = json!(BETA);
        assert_eq!(b, expect);
        let parsed: kruise_api::apps::v1beta1::StatefulSetSpec =
            serde_json::from_value(b["spec"].clone()).expect("typed v1beta1 spec");
        assert_eq!(parsed.replicas, Some(1));
        assert_eq!(convert(&b, ALPHA).expect("back"), a);
    }

    fn arb_sts() -> impl Strategy<Value = Value> {
        let beta_spec = proptest::collection::vec(
            (
                proptest::sample::select(BETA_ONLY_SPEC),
                prop_oneof![
                    Just(json!({})),
                    Just(json!([0, "2-3"])),
                    Just(json!({"whenDeleted": "Retain"})),
                    Just(json!(null)),
                ],
            ),
            0..4,
        );
        let beta_status = proptest::collection::vec(
            (
                proptest::sample::select(BETA_ONLY_STATUS),
                prop_oneof![Just(json!(0)), Just(json!(2)), Just(json!([]))],
            ),
            0..3,
        );
        (
            any::<bool>(),
            beta_spec,
            beta_status,
            prop_oneof![
                Just(None),
                Just(Some(json!({}))),
                Just(Some(json!({"x": "y"})))
            ],
            prop_oneof![
                Just(None),
                Just(Some(json!({}))),
                Just(Some(json!({"replicas": 1})))
            ],
            any::<bool>(),
        )
            .prop_map(
                |(is_beta, spec_extra, status_extra, annotations, status, spec)| {
                    let mut obj = json!({"apiVersion": if is_beta { BETA } else { ALPHA },
                    "kind": "StatefulSet", "metadata": {"name": "s"}});
                    if let Some(a) = annotations {
                        obj["metadata"]["annotations"] = a;
                    }
                    if spec || is_beta && !spec_extra.is_empty() {
                        obj["spec"] = json!({"replicas": 2});
                    }
                    if let Some(s) = status {
                        obj["status"] = s;
                    }
                    if is_beta {
                        for (k, v) in spec_extra {
                            obj["spec"][k] = v;
                        }
                        if !status_extra.is_empty() && obj.get("status").is_none() {
                            obj["status"] = json!({});
                        }
                        for (k, v) in status_extra {
                            obj["status"][k] = v;
                        }
                    }
                    obj
                },
            )
    }

    proptest! {
        #[test]
        fn statefulset_round_trips_exactly(x in arb_sts()) {
            let own = x["apiVersion"].as_str().unwrap_or_default().to_owned();
            let other = if own == ALPHA { BETA } else { ALPHA };
            let y = convert(&x, other).map_err(TestCaseError::fail)?;
            let back = convert(&y, &own).map_err(TestCaseError::fail)?;
            prop_assert_eq!(back, x);
        }
    }
}
