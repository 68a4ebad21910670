//! The webhook's refusal counters, with upstream's names and labels: the PodUnavailableBudget's
//! (upstream `pod_unavailable_budget`, counted in the webhook and in the workloads that charge a
//! budget themselves) and deletion protection's (`namespace_deletion_protection`,
//! `crd_deletion_protection`, `workload_deletion_protection`). The manager registers them in
//! its registry, so they are served on its `/metrics` with its prefix and, as OpenMetrics
//! counters, a `_total` suffix (`kruise_manager_pod_unavailable_budget_total`).

use k8s_openapi::api::core::v1::Pod;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Upstream's labels for a namespaced object: `<kind>_<namespace>_<name>` and who asked.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindNamespaceNameLabels {
    pub kind_namespace_name: String,
    pub username: String,
}

/// Upstream's labels for a cluster-scoped object: its name and who asked.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NameLabels {
    pub name: String,
    pub username: String,
}

/// What a deletion protection refusal is counted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protected<'a> {
    Namespace(&'a str),
    Crd(&'a str),
    /// A workload: kind, namespace, name.
    Workload(&'a str, &'a str, &'a str),
}

/// The counters; cheap to clone (clones count into the same series). Unregistered (the
/// default), they count for nobody.
#[derive(Clone, Debug, Default)]
pub struct ProtectionMetrics {
    pub pod_unavailable_budget: Family<KindNamespaceNameLabels, Counter>,
    pub namespace_deletion_protection: Family<NameLabels, Counter>,
    pub crd_deletion_protection: Family<NameLabels, Counter>,
    pub workload_deletion_protection: Family<KindNamespaceNameLabels, Counter>,
}

impl ProtectionMetrics {
    /// Registers the counters under upstream's names.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "pod_unavailable_budget",
            "Operations a PodUnavailableBudget refused, by the Pod's workload and the requester",
            self.pod_unavailable_budget.clone(),
        );
        registry.register(
            "namespace_deletion_protection",
            "Namespace deletions refused by deletion protection",
            self.namespace_deletion_protection.clone(),
        );
        registry.register(
            "crd_deletion_protection",
            "CustomResourceDefinition deletions refused by deletion protection",
            self.crd_deletion_protection.clone(),
        );
        registry.register(
            "workload_deletion_protection",
            "Workload deletions refused by deletion protection",
            self.workload_deletion_protection.clone(),
        );
    }

    /// A budget refused an operation on `pod`: counted under the Pod's controller (kind and
    /// name), or `unknown` and the Pod's name when it has none, as upstream.
    pub fn budget_refused(&self, pod: &Pod, username: &str) {
        let owner = pod
            .metadata
            .owner_references
            .as_ref()
            .and_then(|refs| refs.iter().find(|r| r.controller == Some(true)));
        let (kind, name) = match owner {
            Some(r) => (r.kind.as_str(), r.name.as_str()),
            None => ("unknown", pod.metadata.name.as_deref().unwrap_or_default()),
        };
        let namespace = pod
            .metadata
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("default");
        self.pod_unavailable_budget
            .get_or_create(&KindNamespaceNameLabels {
                kind_namespace_name: format!("{kind}_{namespace}_{name}"),
                username: username.to_owned(),
            })
            .inc();
    }

    /// Deletion protection refused deleting `what`.
    pub fn deletion_refused(&self, what: Protected<'_>, username: &str) {
        let user = username.to_owned();
        match what {
            Protected::Namespace(name) => {
                self.namespace_deletion_protection
                    .get_or_create(&NameLabels {
                        name: name.to_owned(),
                        username: user,
                    })
            }
            Protected::Crd(name) => self.crd_deletion_protection.get_or_create(&NameLabels {
                name: name.to_owned(),
                username: user,
            }),
            Protected::Workload(kind, namespace, name) => self
                .workload_deletion_protection
                .get_or_create(&KindNamespaceNameLabels {
                    kind_namespace_name: format!("{kind}_{namespace}_{name}"),
                    username: user,
                }),
        }
        .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;
    use serde_json::json;

    fn encoded(m: &ProtectionMetrics) -> String {
        let mut registry = Registry::with_prefix("kruise_manager");
        m.register(&mut registry);
        let mut out = String::new();
        encode(&mut out, &registry).expect("encode");
        out
    }

    #[test]
    fn a_budget_refusal_is_counted_under_the_pods_controller_and_the_requester() {
        let m = ProtectionMetrics::default();
        let owned: Pod = serde_json::from_value(json!({"metadata": {
            "name": "web-abc", "namespace": "shop",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Other", "name": "x", "uid": "1"},
                {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web",
                 "uid": "2", "controller": true}]}}))
        .expect("pod");
        let bare: Pod = serde_json::from_value(json!({"metadata": {"name": "solo"}})).expect("pod");
        m.budget_refused(&owned, "alice");
        m.budget_refused(&owned, "alice");
        m.budget_refused(&bare, "kruise-manager");
        let out = encoded(&m);
        assert!(
            out.contains(
                "kruise_manager_pod_unavailable_budget_total{kind_namespace_name=\"CloneSet_shop_web\",username=\"alice\"} 2"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "kruise_manager_pod_unavailable_budget_total{kind_namespace_name=\"unknown_default_solo\",username=\"kruise-manager\"} 1"
            ),
            "{out}"
        );
    }

    #[test]
    fn deletion_refusals_are_counted_per_kind_of_object() {
        let m = ProtectionMetrics::default();
        m.deletion_refused(Protected::Namespace("team"), "bob");
        m.deletion_refused(Protected::Crd("widgets.example.io"), "bob");
        m.deletion_refused(Protected::Workload("Deployment", "team", "api"), "bob");
        let out = encoded(&m);
        for line in [
            "kruise_manager_namespace_deletion_protection_total{name=\"team\",username=\"bob\"} 1",
            "kruise_manager_crd_deletion_protection_total{name=\"widgets.example.io\",username=\"bob\"} 1",
            "kruise_manager_workload_deletion_protection_total{kind_namespace_name=\"Deployment_team_api\",username=\"bob\"} 1",
        ] {
            assert!(out.contains(line), "{line} in {out}");
        }
    }
}
