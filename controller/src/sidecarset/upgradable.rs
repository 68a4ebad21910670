//! The `SidecarSetUpgradable` Pod condition (upstream `updatePodSidecarSetUpgradableCondition`):
//! each SidecarSet records in its message whether it can upgrade the Pod in place; the
//! condition is True only while none says it cannot.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::{keys, pod as kpod};
use serde_json::Value;

/// The condition after SidecarSet `set_name` marks the Pod `upgradable` (or not), or `None`
/// when the Pod already shows exactly that. The message is upstream's JSON map of SidecarSet
/// name → bool, keys sorted as Go writes them; an unreadable message is an error, as upstream.
pub fn condition(
    pod: &Pod,
    set_name: &str,
    upgradable: bool,
    now: Timestamp,
) -> Result<Option<PodCondition>, serde_json::Error> {
    let old = kpod::condition(pod, keys::SIDECARSET_POD_CONDITION_UPGRADABLE);
    let mut marks: BTreeMap<String, Value> = match old.and_then(|c| c.message.as_deref()) {
        Some(m) if !m.is_empty() => serde_json::from_str(m)?,
        _ => BTreeMap::new(),
    };
    marks.insert(set_name.to_owned(), Value::Bool(upgradable));
    // Only an explicit `false` holds the condition down, as upstream's `v == false`.
    let all = !marks.values().any(|v| v == &Value::Bool(false));
    let (status, reason) = if all {
        (
            keys::k8s::CONDITION_TRUE,
            keys::SIDECARSET_REASON_ALL_UPGRADABLE,
        )
    } else {
        (
            keys::k8s::CONDITION_FALSE,
            keys::SIDECARSET_REASON_UPDATE_IMMUTABLE_FIELD,
        )
    };
    let message = serde_json::to_string(&marks)?;
    if let Some(o) = old
        && o.status == status
        && o.reason.as_deref() == Some(reason)
        && o.message.as_deref() == Some(message.as_str())
    {
        return Ok(None);
    }
    let transition = match old {
        Some(o) if o.status == status => o.last_transition_time.clone(),
        _ => Some(Time(now)),
    };
    Ok(Some(PodCondition {
        type_: keys::SIDECARSET_POD_CONDITION_UPGRADABLE.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message),
        last_transition_time: transition,
        ..old.cloned().unwrap_or_default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(conditions: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"},
            "status": {"conditions": conditions}}))
        .expect("pod")
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).expect("ts")
    }

    #[test]
    fn an_image_only_upgrade_marks_the_pod_upgradable() {
        let c = condition(&pod(json!([])), "mesh", true, at(100))
            .expect("reads")
            .expect("written");
        assert_eq!(c.type_, "SidecarSetUpgradable");
        assert_eq!(c.status, "True");
        assert_eq!(c.reason.as_deref(), Some("AllSidecarsetUpgradable"));
        assert_eq!(c.message.as_deref(), Some(r#"{"mesh":true}"#));
    }

    #[test]
    fn another_sidecarsets_refusal_keeps_it_false_and_nothing_changes_twice() {
        let p = pod(json!([{"type": "SidecarSetUpgradable", "status": "False",
            "reason": "UpdateImmutableField", "message": r#"{"logs":false}"#,
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]));
        let c = condition(&p, "mesh", true, at(100))
            .expect("reads")
            .expect("written");
        assert_eq!(c.status, "False");
        assert_eq!(c.reason.as_deref(), Some("UpdateImmutableField"));
        assert_eq!(c.message.as_deref(), Some(r#"{"logs":false,"mesh":true}"#));
        // Same status: the transition time stays.
        assert_eq!(
            c.last_transition_time,
            kpod::condition(&p, "SidecarSetUpgradable")
                .and_then(|o| o.last_transition_time.clone())
        );
        assert_eq!(condition(&p, "logs", false, at(100)).expect("reads"), None);
        // Once that SidecarSet can, the Pod is upgradable again.
        let mut again = p.clone();
        again.status.as_mut().expect("status").conditions = Some(vec![c]);
        let c = condition(&again, "logs", true, at(200))
            .expect("reads")
            .expect("written");
        assert_eq!(c.status, "True");
        assert_eq!(c.last_transition_time, Some(Time(at(200))));
    }

    #[test]
    fn an_unreadable_message_is_an_error() {
        let p = pod(json!([{"type": "SidecarSetUpgradable", "status": "True",
            "message": "not json"}]));
        assert!(condition(&p, "mesh", true, at(1)).is_err());
    }
}
