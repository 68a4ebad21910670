//! Every handler, fed arbitrary bytes or arbitrary AdmissionReview-shaped JSON, answers with a
//! well-formed review and never panics.

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::{convert, handle_admission, paths};

const ADMISSION_PATHS: &[&str] = &[
    paths::MUTATE_POD,
    paths::MUTATE_CLONESET,
    paths::VALIDATE_CLONESET,
];

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-zA-Z0-9%/._-]{0,12}".prop_map(Value::String),
        proptest::sample::select(vec![
            "CREATE",
            "UPDATE",
            "DELETE",
            "Ordered",
            "InPlaceOnly",
            "OnDelete",
            "RollingUpdate",
            "apps.kruise.io/v1beta1",
            "apps.kruise.io/v1alpha1",
            "KRUISE_CONTAINER_PRIORITY",
            "20%",
            "-1",
        ])
        .prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(
                proptest::sample::select(vec![
                    "metadata",
                    "spec",
                    "name",
                    "containers",
                    "env",
                    "value",
                    "replicas",
                    "selector",
                    "matchLabels",
                    "template",
                    "updateStrategy",
                    "rollingUpdate",
                    "partition",
                    "maxSurge",
                    "maxUnavailable",
                    "type",
                    "podUpdatePolicy",
                    "annotations",
                    "labels",
                    "ownerReferences",
                    "apiVersion",
                    "controller",
                    "scaleStrategy",
                    "podsToDelete",
                    "generateName",
                    "image",
                    "kind",
                ])
                .prop_map(str::to_owned),
                inner,
                0..5,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Review-shaped JSON: valid envelope, arbitrary operation/kind/objects.
fn arb_review() -> impl Strategy<Value = Value> {
    (
        proptest::sample::select(vec!["CREATE", "UPDATE", "DELETE", "CONNECT", "PATCH"]),
        proptest::sample::select(vec![
            ("", "v1", "Pod", "pods"),
            ("apps.kruise.io", "v1beta1", "CloneSet", "clonesets"),
            ("apps.kruise.io", "v1alpha1", "CloneSet", "clonesets"),
            ("apps.kruise.io", "v2", "CloneSet", "clonesets"),
        ]),
        arb_json(),
        arb_json(),
        any::<bool>(),
    )
        .prop_map(|(op, (g, v, k, r), obj, old, with_uid)| {
            let mut req = json!({
                "kind": {"group": g, "version": v, "kind": k},
                "resource": {"group": g, "version": v, "resource": r},
                "operation": op, "userInfo": {"username": "u"},
                "object": obj, "oldObject": old, "namespace": "default", "name": "x"
            });
            if with_uid {
                req["uid"] = json!("uid-9");
            }
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
        })
}

fn assert_admission_review(out: &[u8]) -> Result<(), TestCaseError> {
    let v: Value = serde_json::from_slice(out).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&v["apiVersion"], "admission.k8s.io/v1");
    prop_assert_eq!(&v["kind"], "AdmissionReview");
    let r = &v["response"];
    prop_assert!(r["uid"].is_string());
    prop_assert!(r["allowed"].is_boolean());
    if r["allowed"] == false {
        prop_assert!(
            r["status"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{}",
            r
        );
    }
    Ok(())
}

fn assert_conversion_review(out: &[u8]) -> Result<(), TestCaseError> {
    let v: Value = serde_json::from_slice(out).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&v["apiVersion"], "apiextensions.k8s.io/v1");
    prop_assert_eq!(&v["kind"], "ConversionReview");
    let r = &v["response"];
    prop_assert!(r["uid"].is_string());
    prop_assert!(r["convertedObjects"].is_array());
    let status = r["result"]["status"].as_str();
    prop_assert!(
        status == Some("Success") || status == Some("Failure"),
        "{}",
        r
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn admission_handlers_survive_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        for p in ADMISSION_PATHS {
            let out = handle_admission(p, &bytes).ok_or_else(|| TestCaseError::fail("path"))?;
            assert_admission_review(&out)?;
        }
        assert_conversion_review(&convert::handle(&bytes))?;
    }

    #[test]
    fn admission_handlers_survive_review_shaped_json(review in arb_review()) {
        let body = serde_json::to_vec(&review).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for p in ADMISSION_PATHS {
            let out = handle_admission(p, &body).ok_or_else(|| TestCaseError::fail("path"))?;
            assert_admission_review(&out)?;
        }
    }

    #[test]
    fn patches_apply_to_the_request_object(review in arb_review()) {
        // When a mutating handler answers with a patch, it must apply to the object it was sent.
        let body = serde_json::to_vec(&review).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for p in [paths::MUTATE_POD, paths::MUTATE_CLONESET] {
            let out = handle_admission(p, &body).ok_or_else(|| TestCaseError::fail("path"))?;
            let v: Value = serde_json::from_slice(&out).map_err(|e| TestCaseError::fail(e.to_string()))?;
            if let Some(bytes) = v["response"]["patch"].as_array() {
                let bytes: Vec<u8> = bytes.iter().filter_map(|b| b.as_u64()).map(|b| b as u8).collect();
                let patch: json_patch::Patch = serde_json::from_slice(&bytes)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let mut obj = review["request"]["object"].clone();
                prop_assert!(json_patch::patch(&mut obj, &patch).is_ok(), "{:?} on {}", patch, obj);
            }
        }
    }

    #[test]
    fn conversion_survives_review_shaped_json(
        objects in proptest::collection::vec(arb_json(), 0..3),
        kinded in any::<bool>(),
        desired in proptest::sample::select(vec!["apps.kruise.io/v1beta1", "apps.kruise.io/v1alpha1", "v1", ""]),
    ) {
        let objects: Vec<Value> = objects
            .into_iter()
            .map(|mut o| {
                if kinded && let Some(m) = o.as_object_mut() {
                    m.insert("kind".into(), json!("CloneSet"));
                    m.insert("apiVersion".into(), json!("apps.kruise.io/v1alpha1"));
                }
                o
            })
            .collect();
        let body = serde_json::to_vec(&json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "u", "desiredAPIVersion": desired, "objects": objects}}))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        assert_conversion_review(&convert::handle(&body))?;
    }
}
