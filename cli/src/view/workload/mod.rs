//! The workload kinds the plugin drives, one module each.
//!
//! A kind plugs in through its module's [`KindSpec`]: how users spell it, where it lives on the
//! API, how its spec and status read into a [`RolloutView`], what "done" adds to the shared
//! decision, and which commands apply. The commands ask the spec instead of matching on kinds.

pub mod ads;
pub mod asts;
pub mod broadcastjob;
pub mod cloneset;
pub mod daemonset;
pub mod deployment;
pub mod sidecarset;
pub mod statefulset;
pub mod uniteddeployment;

use crate::view::verdict::{Decision, PodSummary};
use crate::view::{PodView, RolloutView};
use serde_json::Value;
use std::fmt;

/// Workload kinds the rollout commands understand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    CloneSet,
    Deployment,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 DaemonSet.
    DaemonSet,
    /// apps.kruise.io StatefulSet.
    AdvancedStatefulSet,
    /// apps.kruise.io DaemonSet.
    AdvancedDaemonSet,
    SidecarSet,
    /// apps.kruise.io BroadcastJob: one Pod per node, run to completion.
    BroadcastJob,
    /// apps.kruise.io UnitedDeployment: one child workload per subset.
    UnitedDeployment,
}

impl Kind {
    /// Every kind, in the order `TYPE` spellings are tried and help lists them.
    pub const ALL: [Kind; 9] = [
        Kind::CloneSet,
        Kind::Deployment,
        Kind::StatefulSet,
        Kind::DaemonSet,
        Kind::AdvancedStatefulSet,
        Kind::AdvancedDaemonSet,
        Kind::SidecarSet,
        Kind::BroadcastJob,
        Kind::UnitedDeployment,
    ];

    pub fn spec(self) -> &'static KindSpec {
        match self {
            Kind::CloneSet => &cloneset::SPEC,
            Kind::Deployment => &deployment::SPEC,
            Kind::StatefulSet => &statefulset::SPEC,
            Kind::DaemonSet => &daemonset::SPEC,
            Kind::AdvancedStatefulSet => &asts::SPEC,
            Kind::AdvancedDaemonSet => &ads::SPEC,
            Kind::SidecarSet => &sidecarset::SPEC,
            Kind::BroadcastJob => &broadcastjob::SPEC,
            Kind::UnitedDeployment => &uniteddeployment::SPEC,
        }
    }

    /// The wire `kind` (`StatefulSet` for both the native and the Advanced one).
    pub fn as_str(self) -> &'static str {
        self.spec().wire_kind
    }

    /// The `TYPE` this plugin prints in `TYPE/NAME`.
    pub fn type_name(self) -> &'static str {
        self.spec().type_name
    }

    /// The kind of an object from its `apiVersion` and `kind`; unknown objects read as CloneSets,
    /// the layout this plugin started with.
    pub fn of_object(api_version: &str, kind: &str) -> Kind {
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        Kind::ALL
            .into_iter()
            .find(|k| k.spec().group == group && k.spec().wire_kind == kind)
            .unwrap_or(Kind::CloneSet)
    }

    /// Whether the kind's Pods carry an ownerReference to the workload itself.
    pub fn owns_pods(self) -> bool {
        matches!(self.spec().pods, PodSource::Owned)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.spec().human)
    }
}

impl PodView {
    /// The view as `kind` reads it: its Pods' revision from the kind's own label, if it has one.
    pub fn for_kind(mut self, kind: Kind) -> Self {
        if let Some(label) = kind.spec().revision_label {
            self.revision = self.labels.get(label).cloned().unwrap_or_default();
        }
        self
    }
}

/// Where the kind's revisions are kept, for `rollout history` and `rollout undo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum History {
    /// ControllerRevisions owned by the workload (CloneSet, StatefulSets, DaemonSets).
    ControllerRevisions,
    /// ReplicaSets owned by the Deployment.
    ReplicaSets,
    /// No revisions the plugin can roll back to.
    Unsupported,
}

/// How `rollout restart` restarts the kind's Pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// kubectl's `restartedAt` template annotation: the controller replaces the Pods.
    TemplateAnnotation,
    /// ContainerRecreateRequests, batch by batch, in this order.
    InPlace(PodOrder),
    Unsupported,
}

/// The order in which an in-place restart visits Pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodOrder {
    /// Pods already down first, then by name (CloneSet).
    UnreadyFirst,
    /// Highest ordinal first, as a StatefulSet rolls (Advanced StatefulSet).
    OrdinalDescending,
    /// One node after the other (Advanced DaemonSet: one Pod per node).
    ByNode,
}

/// Which Pods belong to the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodSource {
    /// Pods with an ownerReference to the workload.
    Owned,
    /// Every Pod its selector matches in its namespace (Deployment: Pods belong to ReplicaSets).
    Selected,
    /// Pods the selector matches in any namespace (SidecarSet, cluster-scoped).
    SelectedClusterWide,
}

/// Everything the commands need to know about one kind.
pub struct KindSpec {
    pub kind: Kind,
    /// The `kind` on the wire.
    pub wire_kind: &'static str,
    /// Printed as `TYPE` in `TYPE/NAME`.
    pub type_name: &'static str,
    /// How messages name the kind.
    pub human: &'static str,
    pub group: &'static str,
    pub plural: &'static str,
    /// Resource spellings accepted without a group (`asts/web`).
    pub bare: &'static [&'static str],
    /// Resource spellings accepted only with this kind's group (`statefulset.apps.kruise.io/web`).
    pub grouped: &'static [&'static str],
    pub namespaced: bool,
    pub pods: PodSource,
    /// Pods have ordinals (`NAME-0`, `NAME-1`) and the partition is an ordinal: those below it
    /// are kept.
    pub ordered: bool,
    pub partition: bool,
    pub pause: bool,
    pub history: History,
    pub restart: Restart,
    /// What `set image` says when the controller leaves running Pods alone (OnDelete).
    pub on_delete_note: &'static str,
    /// JSON pointer to the containers `set image` edits.
    pub containers_path: &'static str,
    /// Fills the kind's counters and knobs into a view whose metadata is already read.
    pub read: fn(obj: &Value, view: &mut RolloutView),
    /// A verdict the kind reaches before the shared counting (a failure condition), if any.
    pub failure: fn(&RolloutView) -> Option<Decision>,
    /// A wait the kind still imposes once the shared checks pass (old Pods, revisions), if any.
    pub settle: fn(&RolloutView, &PodSummary) -> Option<Decision>,
    /// How an image change rolls out under the object's current strategy.
    pub image_change: fn(&RolloutView) -> String,
    /// The order the live view lists Pods in.
    pub sort_pods: fn(&mut [PodView]),
    /// The Pod label that names the workload's revision, when it is not the one Pods carry for
    /// their own controller (a UnitedDeployment's Pods belong to its subsets' workloads).
    pub revision_label: Option<&'static str>,
}

/// The note for kinds whose OnDelete strategy updates only Pods that get deleted.
pub const ON_DELETE_NOTE: &str = "updateStrategy OnDelete: only pods you delete pick up the change";

/// For kinds without a kind-specific verdict.
pub fn no_decision(_: &RolloutView) -> Option<Decision> {
    None
}

/// For kinds that add nothing once the shared checks pass.
pub fn settled(_: &RolloutView, _: &PodSummary) -> Option<Decision> {
    None
}

/// Pods by name, the default order.
pub fn by_name(pods: &mut [PodView]) {
    pods.sort_by(|a, b| a.name.cmp(&b.name));
}

/// The ordinal of a StatefulSet Pod (`NAME-ORDINAL`), if its name ends in one.
pub fn ordinal(pod_name: &str) -> Option<i64> {
    pod_name.rsplit_once('-').and_then(|(_, o)| o.parse().ok())
}

/// Pods by ordinal, lowest first; Pods without one after them by name.
pub fn by_ordinal(pods: &mut [PodView]) {
    pods.sort_by(|a, b| match (ordinal(&a.name), ordinal(&b.name)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.name.cmp(&b.name),
    });
}

/// Pods by subset (a UnitedDeployment's), then by name.
pub fn by_subset(pods: &mut [PodView]) {
    let subset = |p: &PodView| {
        p.labels
            .get(kruise_api::keys::SUBSET_NAME_LABEL)
            .cloned()
            .unwrap_or_default()
    };
    pods.sort_by(|a, b| (subset(a), &a.name).cmp(&(subset(b), &b.name)));
}

/// Pods by the node they run on (one row per node for DaemonSets), unscheduled last.
pub fn by_node(pods: &mut [PodView]) {
    pods.sort_by(|a, b| {
        (a.node.is_empty(), &a.node, &a.name).cmp(&(b.node.is_empty(), &b.node, &b.name))
    });
}

/// The sentence for kinds that always replace Pods.
pub fn recreates(view: &RolloutView) -> String {
    format!(
        "pods will be RECREATED ({}s replace pods on every template change)",
        view.kind
    )
}

/// The sentence for kinds with a podUpdatePolicy-like switch: in place when `in_place`.
pub fn in_place_or_recreate(view: &RolloutView, in_place: bool, switch: &str) -> String {
    if in_place {
        let grace = if view.grace_period_seconds > 0 {
            format!(
                ", after a {}s grace period per pod",
                view.grace_period_seconds
            )
        } else {
            String::new()
        };
        format!(
            "pods will be updated IN PLACE ({switch} {}: image-only change, containers restart, pods keep name, IP and node{grace})",
            view.pod_update_policy
        )
    } else {
        format!(
            "pods will be RECREATED ({switch} {}; use InPlaceIfPossible to update in place)",
            view.pod_update_policy
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_spec() {
        for k in Kind::ALL {
            assert_eq!(k.spec().kind, k, "{k:?}");
        }
    }

    #[test]
    fn kinds_from_objects() {
        assert_eq!(Kind::of_object("apps/v1", "StatefulSet"), Kind::StatefulSet);
        assert_eq!(
            Kind::of_object("apps.kruise.io/v1beta1", "StatefulSet"),
            Kind::AdvancedStatefulSet
        );
        assert_eq!(Kind::of_object("apps/v1", "DaemonSet"), Kind::DaemonSet);
        assert_eq!(
            Kind::of_object("apps.kruise.io/v1alpha1", "DaemonSet"),
            Kind::AdvancedDaemonSet
        );
        assert_eq!(
            Kind::of_object("apps.kruise.io/v1alpha1", "SidecarSet"),
            Kind::SidecarSet
        );
        assert_eq!(Kind::of_object("apps/v1", "Deployment"), Kind::Deployment);
    }

    #[test]
    fn pod_orders() {
        let pod = |n: &str, node: &str| PodView {
            name: n.into(),
            node: node.into(),
            ..Default::default()
        };
        let mut pods = vec![pod("web-10", ""), pod("web-2", ""), pod("web-0", "")];
        by_ordinal(&mut pods);
        let names: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["web-0", "web-2", "web-10"]);
        let mut pods = vec![pod("a", "n2"), pod("b", ""), pod("c", "n1")];
        by_node(&mut pods);
        let names: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["c", "a", "b"]);
    }
}
