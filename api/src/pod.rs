//! Pod conditions and readiness gates, read and written the way Kubernetes' own helpers do it
//! (upstream `k8s.io/kubernetes/pkg/api/v1/pod`: `GetPodCondition`, `IsPodReady`,
//! `UpdatePodCondition`). Condition and gate types are [`keys::k8s`](crate::keys::k8s) names or
//! Kruise ones (`KruisePodReady`, `InPlaceUpdateReady`).

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodReadinessGate};

use crate::keys::k8s;

/// The pod's condition of `type_`, if reported (upstream `GetPodCondition`).
pub fn condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    crate::condition::get(pod.status.as_ref()?.conditions.as_deref()?, type_)
}

/// Whether the condition of `type_` is reported and True.
pub fn is_condition_true(pod: &Pod, type_: &str) -> bool {
    condition(pod, type_).is_some_and(|c| c.status == k8s::CONDITION_TRUE)
}

/// Whether the pod is Ready (upstream `IsPodReady`).
pub fn is_ready(pod: &Pod) -> bool {
    is_condition_true(pod, k8s::POD_READY)
}

/// Whether the pod declares the readiness gate `type_`.
pub fn has_readiness_gate(pod: &Pod, type_: &str) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.condition_type == type_))
}

/// Adds the readiness gate `type_` once; `false` when the pod has no spec or already has it.
pub fn add_readiness_gate(pod: &mut Pod, type_: &str) -> bool {
    let Some(spec) = pod.spec.as_mut() else {
        return false;
    };
    let gates = spec.readiness_gates.get_or_insert_with(Vec::new);
    if gates.iter().any(|g| g.condition_type == type_) {
        return false;
    }
    gates.push(PodReadinessGate {
        condition_type: type_.to_owned(),
    });
    true
}

/// Sets a condition, replacing the one of the same type. The transition time moves only when
/// the status does; with the status unchanged only reason and message are updated.
pub fn set_condition(pod: &mut Pod, new: PodCondition) {
    let conditions = pod
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    crate::condition::set(conditions, new);
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::{Value, json};

    fn pod(gates: Value, conditions: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "readinessGates": gates},
            "status": {"conditions": conditions},
        }))
        .expect("pod")
    }

    #[test]
    fn condition_lookup_table() {
        let conds = json!([
            {"type": "Ready", "status": "True"},
            {"type": "PodScheduled", "status": "False"},
            {"type": "KruisePodReady", "status": "Unknown"},
        ]);
        let p = pod(json!(null), conds);
        let cases = [
            (k8s::POD_READY, Some("True"), true),
            (k8s::POD_SCHEDULED, Some("False"), false),
            (crate::keys::KRUISE_POD_READY, Some("Unknown"), false),
            (k8s::CONTAINERS_READY, None, false),
        ];
        for (type_, status, truth) in cases {
            assert_eq!(
                condition(&p, type_).map(|c| c.status.as_str()),
                status,
                "{type_}"
            );
            assert_eq!(is_condition_true(&p, type_), truth, "{type_}");
        }
        assert!(is_ready(&p));
        assert!(!is_ready(&Pod::default()));
        assert!(condition(&Pod::default(), k8s::POD_READY).is_none());
    }

    #[test]
    fn readiness_gates() {
        let mut p = pod(json!([{"conditionType": "InPlaceUpdateReady"}]), json!([]));
        assert!(has_readiness_gate(&p, crate::keys::INPLACE_UPDATE_READY));
        assert!(!has_readiness_gate(&p, crate::keys::KRUISE_POD_READY));
        assert!(add_readiness_gate(&mut p, crate::keys::KRUISE_POD_READY));
        assert!(!add_readiness_gate(&mut p, crate::keys::KRUISE_POD_READY));
        assert!(has_readiness_gate(&p, crate::keys::KRUISE_POD_READY));
        assert_eq!(
            p.spec
                .as_ref()
                .and_then(|s| s.readiness_gates.as_ref())
                .map(Vec::len),
            Some(2)
        );
        let mut bare = Pod::default();
        assert!(!has_readiness_gate(&bare, crate::keys::KRUISE_POD_READY));
        assert!(!add_readiness_gate(
            &mut bare,
            crate::keys::KRUISE_POD_READY
        ));
    }

    #[test]
    fn set_condition_moves_transition_time_only_on_status_change() {
        let t = |s: i64| Some(Time(Timestamp::from_second(s).expect("ts")));
        let cond = |status: &str, reason: &str, at: i64| PodCondition {
            type_: "X".into(),
            status: status.into(),
            reason: Some(reason.into()),
            last_transition_time: t(at),
            ..Default::default()
        };
        let mut p = Pod::default();
        set_condition(&mut p, cond("False", "a", 1));
        set_condition(&mut p, cond("False", "b", 2));
        let c = condition(&p, "X").cloned().expect("set");
        assert_eq!(
            (c.reason.as_deref(), c.last_transition_time),
            (Some("b"), t(1))
        );
        set_condition(&mut p, cond("True", "c", 3));
        let c = condition(&p, "X").cloned().expect("set");
        assert_eq!((c.status.as_str(), c.last_transition_time), ("True", t(3)));
        assert_eq!(
            p.status.and_then(|s| s.conditions).map(|c| c.len()),
            Some(1)
        );
    }
}
