//! Lifecycle hooks of workload pods, and the state label + timestamp annotation that record
//! where a pod is in its lifecycle (upstream `pkg/util/lifecycle`).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::serde_util::is_false;

/// Hooks a workload honours around pod creation, in-place update and deletion.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    /// Hook before a pod is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_delete: Option<LifecycleHook>,
    /// Hook before and after a pod is updated in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update: Option<LifecycleHook>,
    /// Hook after a pod is created, before it becomes Normal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_normal: Option<LifecycleHook>,
}

/// A hook is "held" while the pod carries these labels/finalizers; the workload waits for
/// whoever owns the hook to remove them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleHook {
    /// Labels that mark the hook as held.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels_handler: BTreeMap<String, String>,
    /// Finalizers that mark the hook as held.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers_handler: Vec<String>,
    /// Mark the pod not-ready (KruisePodReady) while PreparingDelete/PreparingUpdate; only the
    /// inPlaceUpdate and preDelete hooks honour it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub mark_pod_not_ready: bool,
}

/// Value of the `lifecycle.apps.kruise.io/state` pod label.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum LifecycleStateType {
    /// Created but not yet available; becomes Normal once the preNormal hook is satisfied.
    PreparingNormal,
    /// Required for availability.
    Normal,
    /// Chosen for update; waits for the inPlaceUpdate hook to be released.
    PreparingUpdate,
    /// Being updated.
    Updating,
    /// Updated but not yet back to Normal (inPlaceUpdate hook still held).
    Updated,
    /// Chosen for deletion; deleted once the preDelete hook is released.
    PreparingDelete,
}

impl LifecycleStateType {
    /// Every state, in lifecycle order.
    pub const ALL: [LifecycleStateType; 6] = [
        Self::PreparingNormal,
        Self::Normal,
        Self::PreparingUpdate,
        Self::Updating,
        Self::Updated,
        Self::PreparingDelete,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PreparingNormal => "PreparingNormal",
            Self::Normal => "Normal",
            Self::PreparingUpdate => "PreparingUpdate",
            Self::Updating => "Updating",
            Self::Updated => "Updated",
            Self::PreparingDelete => "PreparingDelete",
        }
    }

    /// The state recorded in a pod's labels, if any and known.
    pub fn from_labels(labels: Option<&BTreeMap<String, String>>) -> Option<Self> {
        labels?
            .get(crate::keys::LIFECYCLE_STATE_LABEL)
            .and_then(|v| v.parse().ok())
    }
}

/// The value of the lifecycle timestamp annotation for `now`: RFC 3339 in whole seconds, UTC
/// (upstream writes `time.Now().Format(time.RFC3339)`).
pub fn lifecycle_timestamp_value(now: Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// When the lifecycle state last changed, from the timestamp annotation; `None` when absent or
/// not RFC 3339.
pub fn lifecycle_timestamp(annotations: Option<&BTreeMap<String, String>>) -> Option<Timestamp> {
    annotations?
        .get(crate::keys::LIFECYCLE_TIMESTAMP_ANNOTATION)?
        .parse()
        .ok()
}

/// Records `state` on a pod's metadata: the state label and the timestamp annotation (upstream
/// `SetPodLifecycle`, which writes both together).
pub fn set_lifecycle_state(meta: &mut ObjectMeta, state: LifecycleStateType, now: Timestamp) {
    meta.labels.get_or_insert_with(BTreeMap::new).insert(
        crate::keys::LIFECYCLE_STATE_LABEL.to_owned(),
        state.as_str().to_owned(),
    );
    meta.annotations.get_or_insert_with(BTreeMap::new).insert(
        crate::keys::LIFECYCLE_TIMESTAMP_ANNOTATION.to_owned(),
        lifecycle_timestamp_value(now),
    );
}

impl fmt::Display for LifecycleStateType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for LifecycleStateType {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| Error::UnknownValue {
                kind: "lifecycle state",
                value: s.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys;

    #[test]
    fn state_label_table() {
        let labels =
            |v: &str| BTreeMap::from([(keys::LIFECYCLE_STATE_LABEL.to_owned(), v.to_owned())]);
        for state in LifecycleStateType::ALL {
            assert_eq!(
                LifecycleStateType::from_labels(Some(&labels(state.as_str()))),
                Some(state)
            );
            assert_eq!(
                state.as_str().parse::<LifecycleStateType>().ok(),
                Some(state)
            );
        }
        for bad in ["", "normal", "Deleting"] {
            assert_eq!(
                LifecycleStateType::from_labels(Some(&labels(bad))),
                None,
                "{bad}"
            );
        }
        assert_eq!(LifecycleStateType::from_labels(None), None);
    }

    #[test]
    fn set_state_writes_label_and_timestamp() {
        let now = Timestamp::from_second(1_800_000_000).expect("ts");
        let mut meta = ObjectMeta::default();
        set_lifecycle_state(&mut meta, LifecycleStateType::Updating, now);
        assert_eq!(
            LifecycleStateType::from_labels(meta.labels.as_ref()),
            Some(LifecycleStateType::Updating)
        );
        assert_eq!(
            meta.annotations
                .as_ref()
                .and_then(|a| a.get(keys::LIFECYCLE_TIMESTAMP_ANNOTATION))
                .map(String::as_str),
            Some("2027-01-15T08:00:00Z")
        );
        assert_eq!(lifecycle_timestamp(meta.annotations.as_ref()), Some(now));
        let odd = BTreeMap::from([(
            keys::LIFECYCLE_TIMESTAMP_ANNOTATION.to_owned(),
            "yesterday".to_owned(),
        )]);
        assert_eq!(lifecycle_timestamp(Some(&odd)), None);
        // Upstream's RFC 3339 with a zone offset reads as the same instant.
        let zoned = BTreeMap::from([(
            keys::LIFECYCLE_TIMESTAMP_ANNOTATION.to_owned(),
            "2027-01-15T16:00:00+08:00".to_owned(),
        )]);
        assert_eq!(lifecycle_timestamp(Some(&zoned)), Some(now));
    }
}
