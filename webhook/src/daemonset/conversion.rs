//! Advanced DaemonSet v1alpha1 ⇄ v1beta1 conversion, after upstream's
//! `daemonset_conversion.go`: `status.daemonSetHash` ⇄ `status.updateRevision`, and
//! `rollingUpdate.partition` an integer in v1alpha1 (a v1beta1 percentage is resolved against
//! `status.desiredNumberScheduled`, rounded up). Everything else is identical; the generic
//! engine keeps what the mapping would lose so round trips are exact.

use serde_json::{Value, json};

use crate::conversion::scheme::{Owned, Scheme};

const OWNED: &[Owned] = &[
    Owned::Value(&["spec", "updateStrategy", "rollingUpdate", "partition"]),
    Owned::Value(&["status", "daemonSetHash"]),
    Owned::Value(&["status", "updateRevision"]),
    Owned::Shape(&["status"]),
    Owned::Shape(&["metadata", "annotations"]),
];

/// DaemonSet v1alpha1 ⇄ v1beta1.
pub const SCHEME: Scheme = Scheme::apps(map_to_v1beta1, map_to_v1alpha1, OWNED);

/// Converts one DaemonSet to `desired`.
pub fn convert(obj: &Value, desired: &str) -> Result<Value, String> {
    SCHEME.convert(obj, desired)
}

fn rename_status(out: &mut Value, from: &str, to: &str) {
    if let Some(status) = out.get_mut("status").and_then(Value::as_object_mut)
        && let Some(v) = status.remove(from)
    {
        status.insert(to.to_owned(), v);
    }
}

/// Plain v1alpha1 → v1beta1.
fn map_to_v1beta1(src: &Value) -> Value {
    let mut out = src.clone();
    rename_status(&mut out, "daemonSetHash", "updateRevision");
    out
}

/// Plain v1beta1 → v1alpha1.
fn map_to_v1alpha1(src: &Value) -> Value {
    let mut out = src.clone();
    rename_status(&mut out, "updateRevision", "daemonSetHash");
    let desired = src
        .pointer("/status/desiredNumberScheduled")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if let Some(p) = out.pointer_mut("/spec/updateStrategy/rollingUpdate/partition")
        && let Some(s) = p.as_str()
    {
        let pct = s
            .strip_suffix('%')
            .and_then(|n| n.parse::<i64>().ok())
            .unwrap_or(0);
        *p = json!((pct * desired + 99) / 100);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beta() -> Value {
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
            "metadata": {"name": "d"},
            "spec": {"selector": {}, "template": {},
                     "updateStrategy": {"rollingUpdate": {"partition": "25%", "maxUnavailable": 3}}},
            "status": {"desiredNumberScheduled": 20, "updateRevision": "abc"}})
    }

    #[test]
    fn beta_to_alpha_renames_the_hash_and_resolves_a_percentage_partition() {
        let a = convert(&beta(), "apps.kruise.io/v1alpha1").expect("converts");
        assert_eq!(a["apiVersion"], "apps.kruise.io/v1alpha1");
        assert_eq!(a["status"]["daemonSetHash"], "abc");
        assert!(a["status"].get("updateRevision").is_none());
        assert_eq!(a["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 5);
        assert_eq!(
            a["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"],
            3
        );
        // And back, exactly.
        let b = convert(&a, "apps.kruise.io/v1beta1").expect("back");
        assert_eq!(b, beta());
    }

    #[test]
    fn alpha_to_beta_keeps_an_integer_partition() {
        let a = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet",
            "metadata": {"name": "d"},
            "spec": {"selector": {}, "template": {}, "updateStrategy": {"rollingUpdate": {"partition": 2}}},
            "status": {"daemonSetHash": "h", "currentNumberScheduled": 1, "numberMisscheduled": 0,
                       "desiredNumberScheduled": 1, "numberReady": 1, "updatedNumberScheduled": 1}});
        let b = convert(&a, "apps.kruise.io/v1beta1").expect("converts");
        assert_eq!(b["status"]["updateRevision"], "h");
        assert_eq!(b["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 2);
        let parsed: kruise_api::apps::v1beta1::DaemonSet =
            serde_json::from_value(b).expect("typed");
        assert_eq!(parsed.status.expect("status").update_revision, "h");
    }
}
