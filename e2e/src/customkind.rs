//! A custom workload kind of the test's own, as a user's whitelist names one: a `GameServerSet`
//! CRD in a group unique to the run, and a ClusterRole bound to the manager's ServiceAccount
//! granting the verbs the feature needs on it (the shipped RBAC does not cover users' kinds).

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::PostParams;
use kube::{Api, Client};
use rand::Rng;
use serde_json::json;

use crate::Result;

/// The kind's plural, as its ClusterRole names it.
const PLURAL: &str = "gameserversets";

/// A `GameServerSet` kind of this run and the manager's grant on it; [`CustomKind::remove`]
/// deletes both.
pub struct CustomKind {
    /// `g<random>.<feature>.e2e.kruise-rs.io`; the kind is served at `v1`.
    pub group: String,
    crd: String,
    role: String,
}

impl CustomKind {
    /// Creates the CRD and grants the manager `verbs` on it. `feature` names the test's feature
    /// in the group and the role (`pps`, `ws`).
    pub async fn create(client: &Client, feature: &str, verbs: &[&str]) -> Result<Self> {
        let suffix: u32 = rand::rng().random_range(0..0xff_ffff);
        let group = format!("g{suffix:06x}.{feature}.e2e.kruise-rs.io");
        let kind = CustomKind {
            crd: format!("{PLURAL}.{group}"),
            role: format!("e2e-{feature}-{suffix:06x}"),
            group,
        };
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": {"name": kind.crd},
            "spec": {
                "group": kind.group, "scope": "Namespaced",
                "names": {"plural": PLURAL, "singular": "gameserverset", "kind": "GameServerSet"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema":
                    {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
            }
        }))?;
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &crd)
            .await?;
        let manager_ns = crate::mode::manager_namespace(client).await?;
        let role: ClusterRole = serde_json::from_value(json!({"metadata": {"name": kind.role},
            "rules": [{"apiGroups": [kind.group], "resources": [PLURAL], "verbs": verbs}]}))?;
        Api::<ClusterRole>::all(client.clone())
            .create(&PostParams::default(), &role)
            .await?;
        let binding: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": kind.role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": kind.role},
            "subjects": [{"kind": "ServiceAccount", "name": "kruise-manager", "namespace": manager_ns}]}))?;
        Api::<ClusterRoleBinding>::all(client.clone())
            .create(&PostParams::default(), &binding)
            .await?;
        Ok(kind)
    }

    /// Deletes the grant and the CRD (and with it the kind's objects). Best effort: a test
    /// reports its own failure, not its cleanup's.
    pub async fn remove(&self, client: &Client) {
        let gone = Default::default();
        let _ = Api::<ClusterRoleBinding>::all(client.clone())
            .delete(&self.role, &gone)
            .await;
        let _ = Api::<ClusterRole>::all(client.clone())
            .delete(&self.role, &gone)
            .await;
        let _ = Api::<CustomResourceDefinition>::all(client.clone())
            .delete(&self.crd, &gone)
            .await;
    }
}
