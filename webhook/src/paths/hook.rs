//! What one hook declares: how the API server is told to call it, and what answers it.

use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys;

use crate::review::{Outcome, Request};

/// Which webhook configuration a hook is registered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The MutatingWebhookConfiguration.
    Mutating,
    /// The ValidatingWebhookConfiguration.
    Validating,
}

/// The one rule a hook is registered with.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// API groups (`""`: the core group).
    pub groups: &'static [&'static str],
    /// API versions.
    pub versions: &'static [&'static str],
    /// `CREATE`, `UPDATE`, `DELETE`.
    pub operations: &'static [&'static str],
    /// Resources (`pods/eviction`: a subresource).
    pub resources: &'static [&'static str],
}

/// Kruise kinds serve v1alpha1 and v1beta1 alike.
pub const BOTH_VERSIONS: &[&str] = &[keys::VERSION_V1ALPHA1, keys::VERSION_V1BETA1];
/// The kinds served as v1alpha1 only.
pub const V1ALPHA1: &[&str] = &[keys::VERSION_V1ALPHA1];
pub const CREATE: &[&str] = &["CREATE"];
pub const CREATE_UPDATE: &[&str] = &["CREATE", "UPDATE"];
pub const CREATE_UPDATE_DELETE: &[&str] = &["CREATE", "UPDATE", "DELETE"];
pub const DELETE: &[&str] = &["DELETE"];

impl Rule {
    /// A Kruise kind of `apps.kruise.io`.
    pub const fn apps(
        versions: &'static [&'static str],
        operations: &'static [&'static str],
        resources: &'static [&'static str],
    ) -> Rule {
        Rule {
            groups: &[keys::APPS_GROUP],
            versions,
            operations,
            resources,
        }
    }
}

/// What the API server does when the hook cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Refuse the request.
    Fail,
    /// The Pod hooks' setting (the chart's `webhookConfiguration.failurePolicy.pods`,
    /// [`crate::WebhookConfig::pod_failure_policy`]).
    PodSetting,
}

/// Which namespaces' objects are sent to the hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespaces {
    /// Every namespace.
    All,
    /// Every namespace but kube-system, the manager's and the exempt ones (the Pod hooks, which
    /// would otherwise block the Pods that bring the manager back).
    OutsideSystem,
}

/// Which objects are sent to the hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Objects {
    /// Every object.
    All,
    /// Only objects carrying the deletion-protection label (the deletion-protection hooks).
    DeletionProtected,
}

/// A handler that reads the cluster; [`crate::handle_admission_async`] runs it with the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterHandler {
    /// Pod creation: SidecarSet injection and the other Pod mutations ([`crate::pod::mutate_pod`]).
    PodMutation,
    /// Pod updates, deletes and evictions ([`crate::pod::validate_pod`]).
    PodValidation,
    /// PodUnavailableBudget validation.
    Budget,
    /// PersistentPodState validation.
    PersistentPodState,
    /// WorkloadSpread validation.
    WorkloadSpread,
    /// Advanced StatefulSet validation, with the StorageClass of a resized claim template.
    StatefulSet,
    /// SidecarSet validation, with the conflict check against the other SidecarSets.
    SidecarSet,
    /// ContainerRecreateRequest admission against its Pod.
    ContainerRecreateRequest,
    /// CloneSet validation, which dry-runs its Pod template.
    CloneSetTemplate,
    /// Deletion protection ([`crate::deletionprotection::handler`]).
    DeletionProtection,
}

/// What answers a hook's requests.
#[derive(Debug, Clone, Copy)]
pub enum Handler {
    /// A function of the request alone.
    Pure(fn(&Request) -> Outcome),
    /// A function of the request and the feature gates (the workloads' defaulting, which
    /// `TemplateNoDefaults` changes).
    Gated(fn(&Request, &FeatureGates) -> Outcome),
    /// A handler that reads the cluster.
    Cluster(ClusterHandler),
}

/// One admission hook: where it is served, how it is registered, what answers it.
#[derive(Debug, Clone, Copy)]
pub struct Hook {
    /// The name registered (upstream's).
    pub name: &'static str,
    /// Mutating or validating.
    pub kind: Kind,
    /// The path registered and served.
    pub path: &'static str,
    /// Further paths served by the same handler, never registered (upstream's version infixes).
    pub aliases: &'static [&'static str],
    /// What the API server sends to it.
    pub rule: Rule,
    /// `failurePolicy`.
    pub failure_policy: FailurePolicy,
    /// `sideEffects`.
    pub side_effects: &'static str,
    /// `namespaceSelector`.
    pub namespaces: Namespaces,
    /// `objectSelector`.
    pub objects: Objects,
    /// Registered only while this gate is on (upstream leaves a hook without its handler out).
    /// The path is served either way.
    pub gate: Option<Gate>,
    /// Requests are refused while one of these gates is off, the first off one named (as
    /// upstream, see [`crate::gate_refusal`]).
    pub refused_without: &'static [Gate],
    /// What answers.
    pub handler: Handler,
}

impl Hook {
    /// The defaults of a hook of `kind`, for the declarations to complete; each names its own
    /// name, path, rule and handler (the ones here are placeholders).
    pub const fn of(kind: Kind) -> Hook {
        Hook {
            name: "",
            kind,
            path: "",
            aliases: &[],
            rule: Rule {
                groups: &[],
                versions: &[],
                operations: &[],
                resources: &[],
            },
            failure_policy: FailurePolicy::Fail,
            side_effects: "None",
            namespaces: Namespaces::All,
            objects: Objects::All,
            gate: None,
            refused_without: &[],
            handler: Handler::Cluster(ClusterHandler::DeletionProtection),
        }
    }

    /// Whether this hook answers `path`.
    pub fn serves(&self, path: &str) -> bool {
        self.path == path || self.aliases.contains(&path)
    }
}
