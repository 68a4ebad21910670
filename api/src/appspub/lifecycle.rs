//! Lifecycle hooks of workload pods.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

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
