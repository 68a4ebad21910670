//! Advanced DaemonSet v1alpha1 ⇄ v1beta1 conversion, after upstream's
//! `daemonset_conversion.go`: `status.daemonSetHash` ⇄ `status.updateRevision`, and
//! `rollingUpdate.partition` an integer in v1alpha1 (a v1beta1 percentage is resolved against
//! `status.desiredNumberScheduled`, rounded up), and the v1alpha1 annotation
//! `daemonset.kruise.io/progressive-create-pod: "true"` ⇄ `spec.scaleStrategy.partitionedScaling`
//! (each direction sets the other; neither clears it). Everything else is identical; the generic
//! engine keeps what the mapping would lose so round trips are exact.

use serde_json::{Value, json};

use kruise_api::keys::DAEMONSET_PROGRESSIVE_CREATE_POD_ANNOTATION as PROGRESSIVE;

use crate::conversion::scheme::{Owned, Scheme, get_at, set_annotation};

const OWNED: &[Owned] = &[
    Owned::Value(&["spec", "updateStrategy", "rollingUpdate", "partition"]),
    Owned::Value(&["status", "daemonSetHash"]),
    Owned::Value(&["status", "updateRevision"]),
    Owned::Shape(&["status"]),
    Owned::Value(&["metadata", "annotations", PROGRESSIVE]),
    Owned::Value(&["spec", "scaleStrategy", "partitionedScaling"]),
    Owned::Shape(&["spec", "scaleStrategy"]),
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
    let progressive = get_at(src, &["metadata", "annotations", PROGRESSIVE]);
    if progressive.and_then(Value::as_str) == Some("true")
        && let Some(spec) = out.get_mut("spec").and_then(Value::as_object_mut)
    {
        let strategy = spec.entry("scaleStrategy").or_insert_with(|| json!({}));
        if !strategy.is_object() {
            *strategy = json!({});
        }
        strategy["partitionedScaling"] = json!(true);
    }
    out
}

/// Plain v1beta1 → v1alpha1.
fn map_to_v1alpha1(src: &Value) -> Value {
    let mut out = src.clone();
    rename_status(&mut out, "updateRevision", "daemonSetHash");
    let partitioned = get_at(src, &["spec", "scaleStrategy", "partitionedScaling"]);
    if partitioned.and_then(Value::as_bool) == Some(true) {
        set_annotation(&mut out, PROGRESSIVE, "true".to_owned());
    }
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

    fn alpha_with(annotations: Value) -> Value {
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet",
            "metadata": {"name": "d", "annotations": annotations},
            "spec": {"selector": {}, "template": {}}})
    }

    #[test]
    fn the_progressive_annotation_is_partitioned_scaling() {
        let b = convert(
            &alpha_with(json!({PROGRESSIVE: "true"})),
            "apps.kruise.io/v1beta1",
        )
        .expect("converts");
        assert_eq!(b["spec"]["scaleStrategy"]["partitionedScaling"], true);
        let typed: kruise_api::apps::v1beta1::DaemonSet =
            serde_json::from_value(b.clone()).expect("typed");
        assert!(typed.spec.scale_strategy.expect("set").partitioned_scaling);
        // Back, exactly as it was.
        let a = convert(&b, "apps.kruise.io/v1alpha1").expect("back");
        assert_eq!(a, alpha_with(json!({PROGRESSIVE: "true"})));
        // Any other value is not the switch.
        let b = convert(
            &alpha_with(json!({PROGRESSIVE: "yes"})),
            "apps.kruise.io/v1beta1",
        )
        .expect("converts");
        assert!(b["spec"].get("scaleStrategy").is_none());
    }

    #[test]
    fn partitioned_scaling_reads_as_the_annotation_in_v1alpha1() {
        let b = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
            "metadata": {"name": "d"},
            "spec": {"selector": {}, "template": {}, "scaleStrategy": {"partitionedScaling": true}}});
        let a = convert(&b, "apps.kruise.io/v1alpha1").expect("converts");
        assert_eq!(a["metadata"]["annotations"][PROGRESSIVE], "true");
        let back = convert(&a, "apps.kruise.io/v1beta1").expect("back");
        assert_eq!(back, b);
        // Off in v1beta1: no annotation.
        let mut off = b.clone();
        off["spec"]["scaleStrategy"]["partitionedScaling"] = json!(false);
        let a = convert(&off, "apps.kruise.io/v1alpha1").expect("converts");
        assert!(a["metadata"].get("annotations").is_none());
    }
}
