//! The workload kinds a PersistentPodState may target beyond the StatefulSets (upstream
//! `CustomWorkloadWhiteList`, key [`keys::PPS_CUSTOM_WORKLOAD_WHITELIST_KEY`] of the
//! `kruise-configuration` ConfigMap): `{"workloads": [{"Group", "Version", "Kind"}]}`, matched
//! by group and kind. Parsed here once for the webhook and the manager.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::workloadspread_whitelist::GroupVersionKind;
use crate::keys;
use crate::policy::v1alpha1::parse_group;

/// The whitelist; empty when the ConfigMap or its key is missing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PpsWorkloadWhiteList {
    #[serde(default)]
    pub workloads: Vec<GroupVersionKind>,
}

/// The whitelist's value does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the {key:?} key of ConfigMap {cm} is not a valid whitelist ({0}); fix it to {{\"workloads\": [{{\"Group\": ..., \"Version\": ..., \"Kind\": ...}}]}}",
    key = keys::PPS_CUSTOM_WORKLOAD_WHITELIST_KEY,
    cm = keys::KRUISE_CONFIGURATION_CONFIGMAP
)]
pub struct PpsWhiteListError(pub String);

/// Whether `api_version`/`kind` is a StatefulSet (apps/v1 or Advanced), which every
/// PersistentPodState may target (upstream `IsDefaultSupport`).
pub fn is_pps_builtin_target(api_version: &str, kind: &str) -> bool {
    kind == "StatefulSet"
        && matches!(parse_group(api_version), Some(g) if g == "apps" || g == keys::APPS_GROUP)
}

impl PpsWorkloadWhiteList {
    /// The whitelist in the ConfigMap's data (empty without the key).
    pub fn from_configuration(data: &BTreeMap<String, String>) -> Result<Self, PpsWhiteListError> {
        match data.get(keys::PPS_CUSTOM_WORKLOAD_WHITELIST_KEY) {
            None => Ok(Self::default()),
            Some(raw) if raw.trim().is_empty() => Ok(Self::default()),
            Some(raw) => serde_json::from_str(raw).map_err(|e| PpsWhiteListError(e.to_string())),
        }
    }

    /// Whether a PersistentPodState may target a `kind` of `api_version`: a StatefulSet, or a
    /// whitelisted group and kind, any version (upstream `ValidateAPIVersionAndKind`).
    pub fn allows(&self, api_version: &str, kind: &str) -> bool {
        if is_pps_builtin_target(api_version, kind) {
            return true;
        }
        let Some(group) = parse_group(api_version) else {
            return false;
        };
        self.workloads
            .iter()
            .any(|w| w.kind == kind && w.group == group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(v: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(
            keys::PPS_CUSTOM_WORKLOAD_WHITELIST_KEY.to_owned(),
            v.to_owned(),
        )])
    }

    #[test]
    fn statefulsets_always_and_listed_kinds_by_group_and_kind() {
        let none = PpsWorkloadWhiteList::from_configuration(&BTreeMap::new()).unwrap();
        assert!(none.allows("apps/v1", "StatefulSet"));
        assert!(none.allows("apps.kruise.io/v1beta1", "StatefulSet"));
        assert!(!none.allows("game.kruise.io/v1alpha1", "GameServerSet"));
        let wl = PpsWorkloadWhiteList::from_configuration(&data(
            r#"{"workloads": [{"Group": "game.kruise.io", "Version": "v1alpha1", "Kind": "GameServerSet"}]}"#,
        ))
        .unwrap();
        assert!(wl.allows("game.kruise.io/v1alpha1", "GameServerSet"));
        assert!(
            wl.allows("game.kruise.io/v2", "GameServerSet"),
            "any version"
        );
        assert!(!wl.allows("other.io/v1alpha1", "GameServerSet"));
        assert!(!wl.allows("game.kruise.io/v1alpha1", "Other"));
        assert!(!wl.allows("apps/v1", "Deployment"));
    }

    #[test]
    fn a_malformed_value_names_the_key() {
        let err = PpsWorkloadWhiteList::from_configuration(&data("{")).unwrap_err();
        assert!(
            err.to_string()
                .contains("PPS_Watch_Custom_Workload_WhiteList"),
            "{err}"
        );
        assert_eq!(
            PpsWorkloadWhiteList::from_configuration(&data(" ")),
            Ok(PpsWorkloadWhiteList::default())
        );
    }
}
