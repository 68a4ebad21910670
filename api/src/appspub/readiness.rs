//! The `KruisePodReady` condition: many writers can each hold the pod not-ready by adding a key
//! to the condition message, a JSON list of `{userAgent, key}` sorted by (userAgent, key).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

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
