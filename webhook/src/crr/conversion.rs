//! ContainerRecreateRequest v1alpha1 ⇄ v1beta1 conversion, after upstream's
//! `containerrecreaterequest_conversion.go`: v1beta1's `status.containerStatusSnapshot` and
//! `PreRecreateGrace` condition are annotations in v1alpha1. Everything else is identical.

use serde_json::{Value, json};

use crate::conversion::scheme::{Owned, Scheme, get_at, set_annotation};
// Upstream uses the same string for the unready-acquired finalizer and the v1alpha1 annotation.
use kruise_api::keys::{
    self, CRR_CONDITION_PRE_RECREATE_GRACE, CRR_SYNC_CONTAINER_STATUSES_ANNOTATION,
    CRR_UNREADY_ACQUIRED_FINALIZER,
};

const GRACE_MESSAGE: &str = "Pod has been forced to not-ready for unreadyGracePeriodSeconds drain";

const OWNED: &[Owned] = &[
    Owned::Value(&["status", "containerStatusSnapshot"]),
    Owned::Value(&["status", "conditions"]),
    Owned::Shape(&["status"]),
    Owned::Value(&[
        "metadata",
        "annotations",
        CRR_SYNC_CONTAINER_STATUSES_ANNOTATION,
    ]),
    Owned::Value(&["metadata", "annotations", CRR_UNREADY_ACQUIRED_FINALIZER]),
    Owned::Shape(&["metadata", "annotations"]),
];

/// ContainerRecreateRequest v1alpha1 ⇄ v1beta1.
pub const SCHEME: Scheme = Scheme::apps(map_to_v1beta1, map_to_v1alpha1, OWNED);

/// Converts one ContainerRecreateRequest to `desired`.
pub fn convert(obj: &Value, desired: &str) -> Result<Value, String> {
    SCHEME.convert(obj, desired)
}

/// RFC 3339 in UTC with second precision, as Go's `time.RFC3339` prints a `metav1.Time`.
fn normalize_time(s: &str) -> Option<String> {
    let ts: jiff::Timestamp = s.parse().ok()?;
    Some(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    get_at(obj, &["metadata", "annotations", key])
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn status_mut(out: &mut Value) -> Option<&mut serde_json::Map<String, Value>> {
    let o = out.as_object_mut()?;
    let s = o.entry("status").or_insert_with(|| json!({}));
    if !s.is_object() {
        return None;
    }
    s.as_object_mut()
}

/// Plain v1alpha1 → v1beta1: annotations promoted into status.
fn map_to_v1beta1(src: &Value) -> Value {
    let mut out = src.clone();
    let snapshot = annotation(src, CRR_SYNC_CONTAINER_STATUSES_ANNOTATION)
        .and_then(|raw| serde_json::from_str::<Value>(raw).ok())
        .filter(Value::is_array);
    let unready = annotation(src, CRR_UNREADY_ACQUIRED_FINALIZER).and_then(normalize_time);
    if snapshot.is_none() && unready.is_none() {
        return out;
    }
    if let Some(status) = status_mut(&mut out) {
        if let Some(s) = snapshot {
            status.insert("containerStatusSnapshot".to_owned(), s);
        }
        if let Some(t) = unready {
            status.insert(
                "conditions".to_owned(),
                json!([{"type": CRR_CONDITION_PRE_RECREATE_GRACE, "status": keys::k8s::CONDITION_TRUE,
                    "lastTransitionTime": t, "reason": CRR_CONDITION_PRE_RECREATE_GRACE,
                    "message": GRACE_MESSAGE}]),
            );
        }
    }
    out
}

/// Plain v1beta1 → v1alpha1: status fields demoted to annotations.
fn map_to_v1alpha1(src: &Value) -> Value {
    let mut out = src.clone();
    let mut snapshot = None;
    let mut unready = None;
    let mut drop_status = false;
    if let Some(status) = out.get_mut("status").and_then(Value::as_object_mut) {
        let before = status.len();
        if let Some(s) = status.remove("containerStatusSnapshot")
            && s.is_array()
        {
            snapshot = Some(s.to_string());
        }
        let conditions = status.remove("conditions");
        // A status that only held v1beta1 fields was most likely created by the forward
        // mapping; dropping it keeps the common round trip free of a record.
        drop_status = status.is_empty() && before > 0;
        if let Some(Value::Array(conds)) = conditions {
            unready = conds
                .iter()
                .find(|c| {
                    c.get("type").and_then(Value::as_str) == Some(CRR_CONDITION_PRE_RECREATE_GRACE)
                        && c.get("status").and_then(Value::as_str)
                            == Some(keys::k8s::CONDITION_TRUE)
                })
                .and_then(|c| c.get("lastTransitionTime")?.as_str())
                .map(|t| normalize_time(t).unwrap_or_else(|| t.to_owned()));
        }
    }
    if drop_status && let Some(o) = out.as_object_mut() {
        o.remove("status");
    }
    if let Some(s) = snapshot {
        set_annotation(&mut out, CRR_SYNC_CONTAINER_STATUSES_ANNOTATION, s);
    }
    if let Some(t) = unready {
        set_annotation(&mut out, CRR_UNREADY_ACQUIRED_FINALIZER, t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALPHA: &str = "apps.kruise.io/v1alpha1";
    const BETA: &str = "apps.kruise.io/v1beta1";

    #[test]
    fn annotations_become_status_and_back() {
        let alpha = json!({"apiVersion": ALPHA, "kind": "ContainerRecreateRequest",
            "metadata": {"name": "r", "annotations": {
                CRR_SYNC_CONTAINER_STATUSES_ANNOTATION: "[{\"name\":\"c\",\"ready\":true,\"restartCount\":1,\"containerID\":\"id\"}]",
                CRR_UNREADY_ACQUIRED_FINALIZER: "2026-01-02T03:04:05Z"}},
            "spec": {"podName": "p", "containers": [{"name": "c"}]},
            "status": {"phase": "Recreating"}});
        let beta = convert(&alpha, BETA).expect("to beta");
        assert_eq!(
            beta["status"]["containerStatusSnapshot"],
            json!([{"name": "c", "ready": true, "restartCount": 1, "containerID": "id"}])
        );
        assert_eq!(beta["status"]["conditions"][0]["type"], "PreRecreateGrace");
        assert_eq!(
            beta["status"]["conditions"][0]["lastTransitionTime"],
            "2026-01-02T03:04:05Z"
        );
        assert_eq!(convert(&beta, ALPHA).expect("back"), alpha);
    }

    #[test]
    fn common_case_needs_no_record() {
        let alpha = json!({"apiVersion": ALPHA, "kind": "ContainerRecreateRequest",
            "metadata": {"name": "r", "annotations": {CRR_SYNC_CONTAINER_STATUSES_ANNOTATION: "[{\"name\":\"c\"}]"}},
            "spec": {"podName": "p"}});
        let beta = convert(&alpha, BETA).expect("to beta");
        assert_eq!(
            beta["metadata"]["annotations"].as_object().map(|a| a.len()),
            Some(1)
        );
        assert_eq!(convert(&beta, ALPHA).expect("back"), alpha);
    }

    #[test]
    fn beta_status_round_trips() {
        let beta = json!({"apiVersion": BETA, "kind": "ContainerRecreateRequest",
            "metadata": {"name": "r"},
            "spec": {"podName": "p", "containers": [{"name": "c"}]},
            "status": {"phase": "Recreating", "containerStatusSnapshot": [{"name": "c"}],
                "conditions": [{"type": "PreRecreateGrace", "status": "True",
                    "lastTransitionTime": "2026-01-02T03:04:05Z", "reason": "x", "message": "m"}]}});
        let alpha = convert(&beta, ALPHA).expect("to alpha");
        assert_eq!(
            alpha["metadata"]["annotations"][CRR_UNREADY_ACQUIRED_FINALIZER],
            "2026-01-02T03:04:05Z"
        );
        assert!(alpha["status"].get("conditions").is_none());
        assert_eq!(convert(&alpha, BETA).expect("back"), beta);
    }

    fn arb_crr() -> impl Strategy<Value = Value> {
        (
            any::<bool>(),
            prop_oneof![Just(None), Just(Some("[{\"name\":\"c\"}]")), Just(Some("junk"))],
            prop_oneof![
                Just(None),
                Just(Some("2026-01-02T03:04:05Z")),
                Just(Some("2026-01-02T03:04:05.5+02:00")),
                Just(Some("yesterday"))
            ],
            prop_oneof![Just(None), Just(Some(json!({}))), Just(Some(json!({"phase": "Completed"})))],
            prop_oneof![
                Just(None),
                Just(Some(json!([{"name": "c", "ready": true}]))),
                Just(Some(json!([])))
            ],
            prop_oneof![
                Just(None),
                Just(Some(json!([{"type": "PreRecreateGrace", "status": "True",
                    "lastTransitionTime": "2026-01-02T03:04:05Z", "reason": "r", "message": "m"}]))),
                Just(Some(json!([{"type": "Other", "status": "False",
                    "lastTransitionTime": "2026-01-02T03:04:05Z", "reason": "r", "message": "m"}]))),
            ],
        )
            .prop_map(|(beta, sync, unready, status, snapshot, conds)| {
                let mut obj = json!({"apiVersion": if beta { BETA } else { ALPHA },
                    "kind": "ContainerRecreateRequest", "metadata": {"name": "r"},
                    "spec": {"podName": "p"}});
                if let Some(s) = sync {
                    set_annotation(&mut obj, CRR_SYNC_CONTAINER_STATUSES_ANNOTATION, s.to_owned());
                }
                if let Some(u) = unready {
                    set_annotation(&mut obj, CRR_UNREADY_ACQUIRED_FINALIZER, u.to_owned());
                }
                if let Some(mut st) = status {
                    if beta {
                        if let Some(s) = snapshot {
                            st["containerStatusSnapshot"] = s;
                        }
                        if let Some(c) = conds {
                            st["conditions"] = c;
                        }
                    }
                    obj["status"] = st;
                }
                obj
            })
    }

    proptest! {
        #[test]
        fn crr_round_trips_exactly(x in arb_crr()) {
            let own = x["apiVersion"].as_str().unwrap_or_default().to_owned();
            let other = if own == ALPHA { BETA } else { ALPHA };
            let y = convert(&x, other).map_err(TestCaseError::fail)?;
            let back = convert(&y, &own).map_err(TestCaseError::fail)?;
            prop_assert_eq!(back, x);
        }
    }
}
