//! The custom workload kinds a WorkloadSpread may target (upstream `WSCustomWorkloadWhiteList`,
//! key [`keys::WS_CUSTOM_WORKLOAD_WHITELIST_KEY`] of the `kruise-configuration` ConfigMap): each
//! kind, the kinds between it and its Pods (`subResources`, e.g. the StatefulSets it owns), and
//! where its replicas are (`replicasPath`). Parsed here once for the webhook and the manager.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::TargetFilter;
use crate::keys;
use crate::policy::v1alpha1::{TargetReference, parse_group};

/// The groups a built-in target kind may have (upstream's `workloads` list); `None` for any
/// other kind, which only the whitelist admits.
pub fn builtin_target_groups(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "CloneSet" => &[keys::APPS_GROUP],
        "Deployment" | "ReplicaSet" => &["apps"],
        "Job" => &["batch"],
        "StatefulSet" => &["apps", keys::APPS_GROUP],
        _ => return None,
    })
}

/// Whether `target` names a built-in kind in one of its groups.
pub fn is_builtin_target(api_version: &str, kind: &str) -> bool {
    builtin_target_groups(kind)
        .is_some_and(|gs| parse_group(api_version).is_some_and(|g| gs.contains(&g)))
}

/// A group, version and kind, spelled as Go's inline `schema.GroupVersionKind` (capitalised;
/// Go also reads lower case, so both are accepted).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersionKind {
    #[serde(rename = "Group", alias = "group", default)]
    pub group: String,
    #[serde(rename = "Version", alias = "version", default)]
    pub version: String,
    #[serde(rename = "Kind", alias = "kind", default)]
    pub kind: String,
}

impl GroupVersionKind {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// One whitelisted kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomWorkload {
    #[serde(flatten)]
    pub gvk: GroupVersionKind,
    /// Kinds the workload creates that own its Pods.
    #[serde(default)]
    pub sub_resources: Vec<GroupVersionKind>,
    /// Dotted path of the replicas in the workload (e.g. `spec.replicas`).
    #[serde(default)]
    pub replicas_path: String,
}

/// The whitelist; empty when the ConfigMap or its key is missing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomWorkloadWhiteList {
    #[serde(default)]
    pub workloads: Vec<CustomWorkload>,
}

/// The whitelist's value does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the {key:?} key of ConfigMap {cm} is not a valid whitelist ({0}); fix it to {{\"workloads\": [{{\"Group\": ..., \"Version\": ..., \"Kind\": ..., \"replicasPath\": ...}}]}}",
    key = keys::WS_CUSTOM_WORKLOAD_WHITELIST_KEY,
    cm = keys::KRUISE_CONFIGURATION_CONFIGMAP
)]
pub struct WhiteListError(pub String);

impl CustomWorkloadWhiteList {
    /// The whitelist in the ConfigMap's data (empty without the key).
    pub fn from_configuration(data: &BTreeMap<String, String>) -> Result<Self, WhiteListError> {
        match data.get(keys::WS_CUSTOM_WORKLOAD_WHITELIST_KEY) {
            None => Ok(Self::default()),
            Some(raw) if raw.trim().is_empty() => Ok(Self::default()),
            Some(raw) => serde_json::from_str(raw).map_err(|e| WhiteListError(e.to_string())),
        }
    }

    /// The entry for a workload of `api_version` and `kind`, matched by group and kind as
    /// upstream's `verifyGroupKind` (any version).
    pub fn workload(&self, api_version: &str, kind: &str) -> Option<&CustomWorkload> {
        let group = parse_group(api_version)?;
        self.workloads
            .iter()
            .find(|w| w.gvk.kind == kind && w.gvk.group == group)
    }

    /// Whether Pods owned by a `kind` of `api_version` may belong to a whitelisted workload:
    /// the kind itself or one of the kinds under it (upstream's `workloads` list).
    pub fn owns_pods(&self, api_version: &str, kind: &str) -> bool {
        let Some(group) = parse_group(api_version) else {
            return false;
        };
        self.workloads.iter().any(|w| {
            std::iter::once(&w.gvk)
                .chain(&w.sub_resources)
                .any(|g| g.kind == kind && g.group == group)
        })
    }
}

impl CustomWorkloadWhiteList {
    /// The paths the caps scale against (upstream `getReplicasPathList`):
    /// `targetFilter.replicasPathList` when it has any, else the whitelisted kind's
    /// `replicasPath`; `None` keeps the kind's own field.
    pub fn replicas_filter(
        &self,
        target: &TargetReference,
        filter: Option<&TargetFilter>,
    ) -> Option<TargetFilter> {
        if filter.is_some_and(|f| !f.replicas_path_list.is_empty()) {
            return filter.cloned();
        }
        let w = self.workload(&target.api_version, &target.kind)?;
        if w.replicas_path.is_empty() {
            return filter.cloned();
        }
        let mut f = filter.cloned().unwrap_or_default();
        f.replicas_path_list = vec![w.replicas_path.clone()];
        Some(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(raw: &str) -> BTreeMap<String, String> {
        [(
            keys::WS_CUSTOM_WORKLOAD_WHITELIST_KEY.to_owned(),
            raw.to_owned(),
        )]
        .into()
    }

    #[test]
    fn reads_upstreams_spelling_and_matches_by_group_and_kind() {
        let list = CustomWorkloadWhiteList::from_configuration(&data(
            r#"{"workloads":[{"Group":"game.example.com","Version":"v1","Kind":"GameServerSet",
               "replicasPath":"spec.replicas",
               "subResources":[{"Group":"apps","Version":"v1","Kind":"StatefulSet"}]}]}"#,
        ))
        .expect("parses");
        let w = list
            .workload("game.example.com/v2", "GameServerSet")
            .expect("any version");
        assert_eq!(w.replicas_path, "spec.replicas");
        assert_eq!(w.gvk.api_version(), "game.example.com/v1");
        assert!(
            list.workload("other.example.com/v1", "GameServerSet")
                .is_none()
        );
        assert!(list.owns_pods("apps/v1", "StatefulSet"));
        assert!(list.owns_pods("game.example.com/v1", "GameServerSet"));
        assert!(!list.owns_pods("apps/v1", "DaemonSet"));
        let lower = CustomWorkloadWhiteList::from_configuration(&data(
            r#"{"workloads":[{"group":"g.io","version":"v1","kind":"K"}]}"#,
        ))
        .expect("parses");
        assert!(lower.workload("g.io/v1", "K").is_some());
    }

    #[test]
    fn missing_is_empty_and_garbage_names_the_key() {
        assert_eq!(
            CustomWorkloadWhiteList::from_configuration(&BTreeMap::new()),
            Ok(CustomWorkloadWhiteList::default())
        );
        let err = CustomWorkloadWhiteList::from_configuration(&data("{not json"))
            .expect_err("refused")
            .to_string();
        assert!(
            err.contains(keys::WS_CUSTOM_WORKLOAD_WHITELIST_KEY)
                && err.contains("kruise-configuration"),
            "{err}"
        );
    }
}
