//! The `KruisePodReady` condition: many writers can each hold the pod not-ready by adding a key
//! to the condition message, a JSON list of `{userAgent, key}` sorted by (userAgent, key).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::keys::{self, k8s};

/// One writer's reason for holding a pod not-ready.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReadinessMessage {
    /// Who holds the pod (`keys::READINESS_USER_AGENT_*`). Field order gives the sort order.
    pub user_agent: String,
    /// Which of its reasons this is.
    pub key: String,
}

impl PodReadinessMessage {
    /// A message for `user_agent` and `key`.
    pub fn new(user_agent: impl Into<String>, key: impl Into<String>) -> Self {
        Self {
            user_agent: user_agent.into(),
            key: key.into(),
        }
    }
}

/// Parses a condition message; an empty message means no keys.
pub fn parse_readiness_messages(message: &str) -> Result<Vec<PodReadinessMessage>> {
    if message.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str::<Option<Vec<PodReadinessMessage>>>(message)
        .map(Option::unwrap_or_default)
        .map_err(Error::InvalidReadinessMessage)
}

/// Serializes keys the way upstream does: sorted, de-duplicated JSON list (`[]` when empty).
pub fn dump_readiness_messages(messages: &[PodReadinessMessage]) -> String {
    let mut sorted = messages.to_vec();
    sorted.sort();
    sorted.dedup();
    // Two plain string fields cannot fail to serialize.
    serde_json::to_string(&sorted).unwrap_or_else(|_| String::from("[]"))
}

/// Adds `msg` to a condition message; returns the new message and whether it changed.
pub fn add_readiness_message(message: &str, msg: &PodReadinessMessage) -> Result<(String, bool)> {
    let mut list = parse_readiness_messages(message)?;
    let changed = !list.contains(msg);
    if changed {
        list.push(msg.clone());
    }
    Ok((dump_readiness_messages(&list), changed))
}

/// Removes `msg` from a condition message; returns the new message and whether it changed.
/// The condition goes back to True when the returned list is empty (`"[]"`).
pub fn remove_readiness_message(
    message: &str,
    msg: &PodReadinessMessage,
) -> Result<(String, bool)> {
    let mut list = parse_readiness_messages(message)?;
    let before = list.len();
    list.retain(|m| m != msg);
    let changed = list.len() != before;
    Ok((dump_readiness_messages(&list), changed))
}

/// The `KruisePodReady` condition to write after `msg` is added (`add`) or removed, or `None`
/// when there is nothing to write (upstream `addNotReadyKey` / `removeNotReadyKey`, minus the
/// API call):
/// - a pod without the `KruisePodReady` readiness gate is left alone;
/// - adding a key already held writes nothing; otherwise the condition goes False;
/// - removing needs the condition and the key; the condition goes True once no key is left;
/// - every write moves `lastTransitionTime` to `now`, as upstream does.
///
/// Upstream leaves the status of a condition it creates empty; this writes False, which every
/// reader (the kubelet included) treats the same way.
pub fn kruise_pod_ready_condition(
    pod: &Pod,
    msg: &PodReadinessMessage,
    add: bool,
    now: Timestamp,
) -> Result<Option<PodCondition>> {
    if !crate::pod::has_readiness_gate(pod, keys::KRUISE_POD_READY) {
        return Ok(None);
    }
    let current = crate::pod::condition(pod, keys::KRUISE_POD_READY);
    let base = current
        .and_then(|c| c.message.as_deref())
        .unwrap_or_default();
    let (message, status) = if add {
        let (message, changed) = add_readiness_message(base, msg)?;
        if current.is_some() && !changed {
            return Ok(None);
        }
        (message, k8s::CONDITION_FALSE.to_owned())
    } else {
        let Some(current) = current else {
            return Ok(None);
        };
        let (message, changed) = remove_readiness_message(base, msg)?;
        if !changed {
            return Ok(None);
        }
        let status = if parse_readiness_messages(&message)?.is_empty() {
            k8s::CONDITION_TRUE.to_owned()
        } else {
            current.status.clone()
        };
        (message, status)
    };
    Ok(Some(PodCondition {
        type_: keys::KRUISE_POD_READY.to_owned(),
        status,
        message: Some(message),
        last_transition_time: Some(Time(now)),
        ..current.cloned().unwrap_or_default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(gate: bool, condition: Option<(&str, &str)>) -> Pod {
        let gates = if gate {
            json!([{"conditionType": keys::KRUISE_POD_READY}])
        } else {
            Value::Null
        };
        let conditions = match condition {
            Some((status, message)) => json!([{"type": keys::KRUISE_POD_READY,
                "status": status, "message": message, "reason": "kept"}]),
            None => json!([]),
        };
        serde_json::from_value(json!({
            "spec": {"containers": [], "readinessGates": gates},
            "status": {"conditions": conditions},
        }))
        .expect("pod")
    }

    /// (gate, current condition (status, message), add?, written (status, message) or nothing).
    type Case<'a> = (
        bool,
        Option<(&'a str, &'a str)>,
        bool,
        Option<(&'a str, String)>,
    );

    #[test]
    fn not_ready_condition_table() {
        let now = Timestamp::from_second(1_800_000_000).expect("ts");
        let a = PodReadinessMessage::new(keys::READINESS_USER_AGENT_LIFECYCLE, "preDeleteHook");
        let b = PodReadinessMessage::new(keys::READINESS_USER_AGENT_CRR, "x");
        let one = dump_readiness_messages(std::slice::from_ref(&a));
        let two = dump_readiness_messages(&[a.clone(), b.clone()]);
        // (gate, condition, add?, expected (status, message) or nothing to write)
        let cases: Vec<Case<'_>> = vec![
            (false, None, true, None),
            (false, Some(("True", "[]")), false, None),
            (true, None, true, Some(("False", one.clone()))),
            (true, Some(("True", "")), true, Some(("False", one.clone()))),
            (
                true,
                Some(("True", "[]")),
                true,
                Some(("False", one.clone())),
            ),
            (true, Some(("False", &one)), true, None),
            // Upstream writes nothing when the key is already there, whatever the status.
            (true, Some(("True", &one)), true, None),
            (
                true,
                Some(("False", &one)),
                false,
                Some(("True", "[]".into())),
            ),
            (
                true,
                Some(("False", &two)),
                false,
                Some(("False", dump_readiness_messages(std::slice::from_ref(&b)))),
            ),
            (true, Some(("True", "[]")), false, None),
            (true, None, false, None),
        ];
        for (gate, cond, add, want) in cases {
            let got = kruise_pod_ready_condition(&pod(gate, cond), &a, add, now).expect("readable");
            let got_pair = got
                .as_ref()
                .map(|c| (c.status.as_str(), c.message.clone().unwrap_or_default()));
            assert_eq!(
                got_pair,
                want.as_ref().map(|(s, m)| (*s, m.clone())),
                "gate={gate} {cond:?} add={add}"
            );
            if let Some(c) = got {
                assert_eq!(c.type_, keys::KRUISE_POD_READY);
                assert_eq!(c.last_transition_time, Some(Time(now)));
                if cond.is_some() {
                    assert_eq!(c.reason.as_deref(), Some("kept"));
                }
            }
        }
        let broken = pod(true, Some(("False", "not json")));
        assert!(kruise_pod_ready_condition(&broken, &a, true, now).is_err());
    }
}
