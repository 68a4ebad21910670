//! The objects around a Pod create that the Pod webhook reads (kruise-bench's admission
//! shapes): SidecarSets, most selecting nothing the benchmark's Pods carry and a few that
//! inject into them, and one PodUnavailableBudget, WorkloadSpread and PersistentPodState in the
//! Pods' namespace. Both systems serve the versions used here (SidecarSet `v1beta1`, the others
//! `v1alpha1`), so the same objects are made in each system's turn.

use std::time::Duration;

use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::{Result, image, wait_for};

/// Label on every SidecarSet made here: what [`remove_sidecar_sets`] deletes by.
pub const OWNER_LABEL: &str = "kruise-bench/admission";

/// What to make around the Pod creates.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shape {
    /// SidecarSets in all.
    pub sidecar_sets: usize,
    /// How many of them select the benchmark's Pods (each injects one sidecar).
    pub matching: usize,
    /// A PodUnavailableBudget selecting the Pods, a WorkloadSpread and a PersistentPodState
    /// (whose targets the Pods are not) in the Pods' namespace.
    pub objects: bool,
}

impl Shape {
    /// "500 SidecarSets (2 selecting the Pods), PUB, WS, PPS" or "none".
    pub fn label(&self) -> String {
        let mut parts = Vec::new();
        if self.sidecar_sets > 0 {
            parts.push(format!(
                "{} SidecarSets ({} selecting the Pods)",
                self.sidecar_sets,
                self.matching.min(self.sidecar_sets)
            ));
        }
        if self.objects {
            parts.push("PUB, WS, PPS".to_owned());
        }
        if parts.is_empty() {
            "none".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

fn api(
    client: &Client,
    group: &str,
    version: &str,
    kind: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

fn sidecar_sets(client: &Client) -> Api<DynamicObject> {
    api(client, "apps.kruise.io", "v1beta1", "SidecarSet", None)
}

/// SidecarSet `i`: selecting `pod_labels` when given, else a label no Pod carries.
fn sidecar_set(i: usize, pod_labels: Option<&Value>) -> Value {
    let selector = pod_labels
        .cloned()
        .unwrap_or_else(|| json!({"kruise-bench-sidecar": format!("set-{i}")}));
    json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "SidecarSet",
        "metadata": {"name": format!("bench-admission-{i:04}"), "labels": {OWNER_LABEL: "true"}},
        "spec": {
            "selector": {"matchLabels": selector},
            "containers": [{
                "name": format!("sidecar-{i}"),
                "image": image("testapp", "v1"),
                "command": ["sleep", "3600"]
            }]
        }
    })
}

async fn create(api: &Api<DynamicObject>, v: Value) -> Result<()> {
    let o: DynamicObject = serde_json::from_value(v)?;
    api.create(&PostParams::default(), &o).await?;
    Ok(())
}

/// Makes `shape`'s objects; the namespaced ones in `ns` (they go with it). `pod_labels`: the
/// labels of the Pods that will be created (the matching SidecarSets and the budget select
/// them). Returns once every SidecarSet's status has caught up with its spec, so that the
/// manager's reconciles of them do not overlap the timing.
pub async fn make(client: &Client, ns: &str, pod_labels: &Value, shape: Shape) -> Result<()> {
    let sets = sidecar_sets(client);
    // Eight at a time: the validating hook of each system reads every SidecarSet per create.
    let specs: Vec<Value> = (0..shape.sidecar_sets)
        .map(|i| sidecar_set(i, (i < shape.matching).then_some(pod_labels)))
        .collect();
    for chunk in specs.chunks(8) {
        futures::future::try_join_all(chunk.iter().map(|v| create(&sets, v.clone()))).await?;
    }
    if shape.objects {
        let budget = api(
            client,
            "policy.kruise.io",
            "v1alpha1",
            "PodUnavailableBudget",
            Some(ns),
        );
        create(
            &budget,
            json!({
                "apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
                "metadata": {"name": "bench-pub"},
                "spec": {"selector": {"matchLabels": pod_labels}, "maxUnavailable": 1}
            }),
        )
        .await?;
        let spread = api(
            client,
            "apps.kruise.io",
            "v1alpha1",
            "WorkloadSpread",
            Some(ns),
        );
        create(&spread, json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
            "metadata": {"name": "bench-ws"},
            "spec": {
                "targetRef": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "bench-ws-target"},
                "subsets": [{"name": "a", "maxReplicas": 1}, {"name": "b"}]
            }
        }))
        .await?;
        let pps = api(
            client,
            "apps.kruise.io",
            "v1alpha1",
            "PersistentPodState",
            Some(ns),
        );
        create(&pps, json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "PersistentPodState",
            "metadata": {"name": "bench-pps"},
            "spec": {
                "targetRef": {"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "bench-pps-target"},
                "requiredPersistentTopology": {"nodeTopologyKeys": ["kubernetes.io/hostname"]}
            }
        }))
        .await?;
    }
    if shape.sidecar_sets > 0
        && let Err(e) = settle(&sets, shape.sidecar_sets).await
    {
        // A status that never catches up is the system's business; the timing goes on.
        eprintln!("kruise-bench: {e}");
    }
    Ok(())
}

/// Waits until every SidecarSet made here has a status for its generation.
async fn settle(sets: &Api<DynamicObject>, n: usize) -> Result<()> {
    let lp = ListParams::default().labels(&format!("{OWNER_LABEL}=true"));
    wait_for(
        "the SidecarSets' status",
        Duration::from_secs(180),
        || async {
            let list = sets.list(&lp).await?;
            let done = list
                .items
                .iter()
                .filter(|s| {
                    let observed = s
                        .data
                        .pointer("/status/observedGeneration")
                        .and_then(Value::as_i64);
                    observed.is_some() && observed == s.metadata.generation
                })
                .count();
            Ok((done >= n).then_some(()))
        },
    )
    .await
}

/// Deletes every SidecarSet [`make`] made and waits until they are gone.
pub async fn remove_sidecar_sets(client: &Client) -> Result<()> {
    let sets = sidecar_sets(client);
    let lp = ListParams::default().labels(&format!("{OWNER_LABEL}=true"));
    if sets.list_metadata(&lp).await?.items.is_empty() {
        return Ok(());
    }
    sets.delete_collection(&DeleteParams::default(), &lp)
        .await?;
    wait_for(
        "the SidecarSets deleted",
        Duration::from_secs(180),
        || async {
            Ok(sets
                .list_metadata(&lp)
                .await?
                .items
                .is_empty()
                .then_some(()))
        },
    )
    .await
}
