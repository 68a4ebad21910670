//! Every handler, fed arbitrary bytes or arbitrary AdmissionReview-shaped JSON, answers with a
//! well-formed review and never panics.

use proptest::prelude::*;
use serde_json::{Value, json};

use kube::core::{Status, response::StatusCause, response::StatusDetails};

use crate::cloneset::template::{DryRun, PodDraft, PodDryRun, Verdict, judge};
use crate::crr::tests::{StaticPods, pod};
use crate::{handle_admission_async, paths};

/// Every path the server routes, the cluster-reading one included.
const ADMISSION_PATHS: &[&str] = paths::ADMISSION;

/// The mutating paths, whose patches must apply to the object they were computed from.
const MUTATING_PATHS: &[&str] = &[
    paths::MUTATE_POD,
    paths::MUTATE_CLONESET,
    paths::MUTATE_IMAGEPULLJOB,
    paths::MUTATE_IMAGELISTPULLJOB,
    paths::MUTATE_NODEIMAGE,
    paths::MUTATE_CRR,
];

/// Runs a path's handler with Pod `default/p` (running, containers a and b) in the "cluster".
fn serve(path: &str, body: &[u8]) -> Result<Vec<u8>, TestCaseError> {
    let pods = StaticPods(vec![pod()]);
    tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| TestCaseError::fail(e.to_string()))?
        .block_on(handle_admission_async(
            path,
            body,
            &pods,
            &kruise_api::features::FeatureGates::default()
                .with(kruise_api::features::Gate::ImagePullJobGate, true),
        ))
        .ok_or_else(|| TestCaseError::fail(format!("{path} not served")))
}

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
            "p",
            "a",
            "Fail",
            "nginx:1",
            "Never",
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
                    "podName",
                    "strategy",
                    "failurePolicy",
                    "statusContext",
                    "preStop",
                    "ports",
                    "activeDeadlineSeconds",
                    "images",
                    "completionPolicy",
                    "pullPolicy",
                    "podSelector",
                    "names",
                    "matchExpressions",
                    "operator",
                    "values",
                    "tags",
                    "revisionHistoryLimit",
                    "parallelism",
                    "pullSecrets",
                    "volumeClaimTemplates",
                    "volumes",
                    "finalizers",
                    "persistentVolumeClaim",
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
            (
                "apps.kruise.io",
                "v1beta1",
                "ContainerRecreateRequest",
                "containerrecreaterequests",
            ),
            (
                "apps.kruise.io",
                "v1alpha1",
                "ImageListPullJob",
                "imagelistpulljobs",
            ),
            ("apps.kruise.io", "v1beta1", "ImagePullJob", "imagepulljobs"),
            ("apps.kruise.io", "v1beta1", "NodeImage", "nodeimages"),
            (
                "apps.kruise.io",
                "v1beta1",
                "AdvancedCronJob",
                "advancedcronjobs",
            ),
            ("apps.kruise.io", "v1beta1", "BroadcastJob", "broadcastjobs"),
            (
                "apps.kruise.io",
                "v1alpha1",
                "BroadcastJob",
                "broadcastjobs",
            ),
            (
                "apps.kruise.io",
                "v1alpha1",
                "EphemeralJob",
                "ephemeraljobs",
            ),
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

/// ContainerRecreateRequest-shaped objects that often name the Pod and its containers, so the
/// handler gets past the Pod lookup into admission proper.
fn arb_crr_review() -> impl Strategy<Value = Value> {
    // Weighted toward what admits (a lone running container "a", nothing else set).
    let rare_json = || prop_oneof![3 => Just(None), 1 => arb_json().prop_map(Some)];
    let container = (
        proptest::sample::select(vec!["a", "a", "a", "b", "x", ""]),
        rare_json(),
    )
        .prop_map(|(name, extra)| {
            let mut c = json!({"name": name});
            if let Some(e) = extra {
                c["ports"] = e;
            }
            c
        });
    (
        proptest::sample::select(vec!["p", "p", "missing", ""]),
        proptest::collection::vec(container, 0..3),
        rare_json(),
        rare_json(),
        any::<bool>(),
    )
        .prop_map(|(pod, containers, strategy, metadata, create)| {
            let mut spec = json!({"podName": pod, "containers": containers});
            if let Some(st) = strategy {
                spec["strategy"] = st;
            }
            let mut obj = json!({"apiVersion": "apps.kruise.io/v1beta1",
                "kind": "ContainerRecreateRequest", "spec": spec});
            if let Some(m) = metadata {
                obj["metadata"] = m;
            }
            let g = ("apps.kruise.io", "v1beta1", "ContainerRecreateRequest");
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": "u", "kind": {"group": g.0, "version": g.1, "kind": g.2},
                "resource": {"group": g.0, "version": g.1, "resource": "containerrecreaterequests"},
                "operation": if create { "CREATE" } else { "UPDATE" },
                "userInfo": {"username": "u"}, "namespace": "default", "name": "r",
                "object": obj.clone(), "oldObject": if create { Value::Null } else { obj }}})
        })
}

fn patch_of(out: &[u8]) -> Result<Option<json_patch::Patch>, TestCaseError> {
    let v: Value = serde_json::from_slice(out).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let Some(bytes) = v["response"]["patch"].as_array() else {
        return Ok(None);
    };
    let bytes: Vec<u8> = bytes
        .iter()
        .filter_map(|b| b.as_u64())
        .map(|b| b as u8)
        .collect();
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| TestCaseError::fail(e.to_string()))
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

/// A Status as an API server (or a proxy in front of it) might answer a dry-run Pod create.
fn arb_status() -> impl Strategy<Value = Status> {
    let field = proptest::sample::select(vec![
        "",
        "spec.containers[0].name",
        "metadata.labels",
        "spec.volumes[0].name",
        "spec.volumes[1].name",
        "spec.volumes[7].persistentVolumeClaim.claimName",
        "spec.volumes[",
        "spec.volumes[99999999999999999999].name",
    ]);
    let cause = (field, "[ -~]{0,20}").prop_map(|(f, m)| StatusCause {
        reason: "FieldValueInvalid".into(),
        message: m,
        field: f.to_owned(),
    });
    (
        proptest::sample::select(vec![0u16, 200, 400, 401, 403, 404, 409, 422, 429, 500, 503]),
        prop_oneof![
            "[ -~]{0,40}",
            Just("admission webhook \"x\" denied the request: no".to_owned()),
            Just("Pod \"kruise-template-check-a\" is invalid: spec: bad".to_owned()),
        ],
        proptest::option::of(proptest::collection::vec(cause, 0..4)),
    )
        .prop_map(|(code, message, causes)| Status {
            code,
            message,
            details: causes.map(|causes| StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: "Pod".into(),
                uid: String::new(),
                causes,
                retry_after_seconds: 0,
            }),
            ..Default::default()
        })
}

/// Answers every dry-run with the same Status.
struct Answer(Status);

impl crate::sidecarset::SidecarSetLookup for Answer {}
impl crate::podunavailablebudget::PubLookup for Answer {}
impl crate::persistentpodstate::PpsLookup for Answer {}
impl crate::workloadspread::WsLookup for Answer {}
impl crate::podprobemarker::PpmLookup for Answer {}
impl crate::statefulset::claims::StorageClassLookup for Answer {}
impl crate::configuration::scope::ScopeLookup for Answer {}

impl crate::deletionprotection::ProtectionLookup for Answer {}

impl crate::crr::mutation::PodLookup for Answer {
    async fn pod(
        &self,
        _namespace: &str,
        _name: &str,
    ) -> Result<Option<k8s_openapi::api::core::v1::Pod>, String> {
        Ok(None)
    }
}

impl PodDryRun for Answer {
    async fn dry_run_create(&self, _namespace: &str, _pod: &Value) -> DryRun {
        DryRun::Refused(Box::new(self.0.clone()))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn dry_run_pods_come_from_the_template_only(cs in arb_json(), ns in "[a-z]{1,8}") {
        if let Some(draft) = PodDraft::from_cloneset(&cs, &ns) {
            let meta = &draft.pod["metadata"];
            prop_assert_eq!(&meta["generateName"], crate::cloneset::template::DRY_RUN_GENERATE_NAME);
            prop_assert_eq!(&meta["namespace"], &json!(ns));
            prop_assert!(meta.get("name").is_none() && meta.get("ownerReferences").is_none());
            let volumes = draft.pod["spec"]["volumes"].as_array().map_or(0, Vec::len);
            if draft.pod["spec"]["volumes"].is_array() {
                prop_assert_eq!(volumes, draft.template_volumes + draft.claims.len());
            }
        }
    }

    #[test]
    fn any_answer_is_read_without_panicking(status in arb_status(), cs in arb_json()) {
        let cs = if cs.is_object() { cs } else { json!({}) };
        let draft = PodDraft::from_cloneset(&cs, "ns").unwrap_or(PodDraft {
            pod: json!({}), template_volumes: 1, claims: vec![3],
        });
        match judge(&draft, DryRun::Refused(Box::new(status.clone()))) {
            Verdict::Invalid(errs) => {
                prop_assert!(matches!(status.code, 400 | 422), "{:?}", status);
                prop_assert!(!errs.is_empty());
                for e in errs {
                    prop_assert!(e.path.starts_with("spec.template")
                        || e.path.starts_with("spec.volumeClaimTemplates["), "{}", e.path);
                }
            }
            Verdict::Valid => prop_assert!(false, "a refusal is never valid: {:?}", status),
            Verdict::NotJudged(_) | Verdict::Unavailable(_) => {}
        }
    }

    #[test]
    fn cloneset_validation_answers_any_dry_run_outcome(review in arb_review(), status in arb_status()) {
        let body = serde_json::to_vec(&review).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let out = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| TestCaseError::fail(e.to_string()))?
            .block_on(handle_admission_async(
                paths::VALIDATE_CLONESET,
                &body,
                &Answer(status),
                &Default::default(),
            ))
            .ok_or_else(|| TestCaseError::fail("not served"))?;
        assert_admission_review(&out)?;
    }

    #[test]
    fn admission_handlers_survive_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        for p in ADMISSION_PATHS {
            assert_admission_review(&serve(p, &bytes)?)?;
        }
        assert_conversion_review(&crate::handle_conversion(&bytes))?;
    }

    #[test]
    fn admission_handlers_survive_review_shaped_json(review in arb_review()) {
        let body = serde_json::to_vec(&review).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for p in ADMISSION_PATHS {
            assert_admission_review(&serve(p, &body)?)?;
        }
    }

    #[test]
    fn patches_apply_to_the_request_object(review in arb_review()) {
        // When a mutating handler answers with a patch, it must apply to the object it was sent.
        let body = serde_json::to_vec(&review).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for p in MUTATING_PATHS {
            let out = serve(p, &body)?;
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
    fn crr_admission_survives_crr_shaped_json(review in arb_crr_review()) {
        let body = serde_json::to_vec(&review).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for p in [paths::MUTATE_CRR, paths::VALIDATE_CRR] {
            let out = serve(p, &body)?;
            assert_admission_review(&out)?;
            if let Some(patch) = patch_of(&out)? {
                let mut obj = review["request"]["object"].clone();
                prop_assert!(json_patch::patch(&mut obj, &patch).is_ok(), "{:?} on {}", patch, obj);
                // An admitted request is complete: the daemon can act on it as stored.
                let containers = obj["spec"]["containers"].as_array().cloned().unwrap_or_default();
                prop_assert!(!containers.is_empty());
                for c in containers {
                    prop_assert!(c["statusContext"]["containerID"].is_string(), "{}", obj);
                }
                prop_assert_eq!(&obj["metadata"]["labels"]["crr.apps.kruise.io/pod-uid"], "pod-uid");
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
        assert_conversion_review(&crate::handle_conversion(&body))?;
    }
}
