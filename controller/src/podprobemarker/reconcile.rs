//! The three reconciles: a marker's status and Events, a node's NodePodProbe spec, a
//! NodePodProbe's results onto the Pods.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_api::apps::v1alpha1::podprobemarker::{
    REASON_CONTAINER_NOT_FOUND, split_node_probe_name,
};
use kruise_api::apps::v1alpha1::{NodePodProbe, NodePodProbeSpec, PodProbeMarker};
use kruise_api::keys;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::context::{CONTROLLER_NAME, Context};
use super::error::Error;
use super::{plan, results, serverless};
use crate::runner::finalizer;

/// A marker: its status (matched Pods), and one Warning Event per Pod lacking a probed
/// container (upstream's controller skips such a probe; the Event says why nothing happens).
pub async fn marker(ppm: Arc<PodProbeMarker>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = ppm.namespace().unwrap_or_default();
    let api = Api::<PodProbeMarker>::namespaced(ctx.client.clone(), &ns);
    if ppm.metadata.deletion_timestamp.is_some() {
        return release(&api, &ppm, &ctx).await;
    }
    finalizer::add(&api, ppm.as_ref(), keys::PODPROBEMARKER_FINALIZER).await?;
    prune_reported(&ctx);
    let pods = ctx.pods.in_namespace(&ns);
    for pod in pods
        .iter()
        .filter(|p| plan::selects(&ppm, p) && plan::probed_node(p).is_some())
    {
        for probe in plan::missing_containers(&ppm, pod) {
            let key = (
                pod.uid().unwrap_or_default(),
                format!("{}/{probe}", ppm.name_any()),
            );
            let fresh = ctx
                .reported
                .lock()
                .map(|mut r| r.insert(key))
                .unwrap_or(false);
            if fresh {
                let container = ppm
                    .spec
                    .probes
                    .iter()
                    .find(|p| p.name == probe)
                    .map(|p| p.container_name.as_str())
                    .unwrap_or_default();
                ctx.warn(
                    pod,
                    REASON_CONTAINER_NOT_FOUND,
                    format!(
                        "PodProbeMarker {} probe {probe}: the Pod has no container {container:?}; \
                         the probe is not run for this Pod",
                        ppm.name_any()
                    ),
                )
                .await;
            }
        }
    }
    if ctx.serverless {
        mark_serverless(&ppm, &pods, &ctx).await?;
    }
    let status = plan::status(&ppm, pods.iter().map(Arc::as_ref));
    if ppm.status.as_ref() != Some(&status) {
        api.patch_status(
            &ppm.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await?;
    }
    Ok(Action::await_change())
}

/// Marks the marker's Pods on serverless nodes from their conditions (upstream
/// `markServerlessPod`): a plain Pod patch, the conditions being the node agent's.
async fn mark_serverless(
    ppm: &PodProbeMarker,
    pods: &[Arc<Pod>],
    ctx: &Context,
) -> Result<(), Error> {
    for pod in pods.iter().filter(|p| serverless::matched(ppm, p)) {
        let on_serverless = plan::probed_node(pod)
            .and_then(|n| ctx.nodes.get(&ObjectRef::new(n)))
            .is_some_and(|n| serverless::is_serverless(&n));
        if !on_serverless {
            continue;
        }
        let Some(mut patch) = serverless::marks(ppm, pod) else {
            continue;
        };
        // Only the Pod the marks were computed for.
        patch["metadata"]["uid"] = json!(pod.uid());
        let api = Api::<Pod>::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
        let pp = PatchParams {
            field_manager: Some(CONTROLLER_NAME.to_owned()),
            ..Default::default()
        };
        match api.patch(&pod.name_any(), &pp, &Patch::Merge(&patch)).await {
            Ok(_) => {}
            // Gone, or replaced by a Pod of the same name: nothing to mark.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => continue,
            Err(e) => return Err(e.into()),
        }
        tracing::info!(pod = %crate::runner::object_key(pod.as_ref()), patch = %patch, "serverless pod marked");
    }
    Ok(())
}

/// A marker being deleted: its finalizer goes once no NodePodProbe lists its probes (the
/// nodes' loop, woken by the deletion, rewrites them without it; upstream
/// `handlerPodProbeMarkerFinalizer`).
async fn release(
    api: &Api<PodProbeMarker>,
    ppm: &PodProbeMarker,
    ctx: &Context,
) -> Result<Action, Error> {
    if !finalizer::has(ppm, keys::PODPROBEMARKER_FINALIZER) {
        return Ok(Action::await_change());
    }
    if ctx
        .probes
        .state()
        .iter()
        .any(|npp| plan::still_listed(ppm, npp))
    {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    match finalizer::remove(api, ppm, keys::PODPROBEMARKER_FINALIZER).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Action::await_change())
}

/// Forgets the reported pairs of Pods that are gone, so the set stays as large as the live
/// Pods lacking a container (it is empty, and costs nothing, while none does).
fn prune_reported(ctx: &Context) {
    let Ok(mut reported) = ctx.reported.lock() else {
        return;
    };
    if reported.is_empty() {
        return;
    }
    let live: std::collections::HashSet<String> = ctx
        .pods
        .store()
        .state()
        .iter()
        .filter_map(|p| p.uid())
        .collect();
    reported.retain(|(uid, _)| live.contains(uid));
}

/// A node: its NodePodProbe exists (owned by the Node) and lists the probes of its Pods.
pub async fn node(node: Arc<Node>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = node.name_any();
    // Upstream's NodePodProbe controller skips virtual-kubelet nodes: no kruise-daemon runs
    // there (their Pods are marked from their conditions instead).
    if serverless::is_serverless(&node) {
        return Ok(Action::await_change());
    }
    let markers = ctx.markers.state();
    let markers: Vec<&PodProbeMarker> = markers.iter().map(Arc::as_ref).collect();
    // No marker, no probes: the Pods need not be read.
    let desired = if markers.is_empty() {
        Vec::new()
    } else {
        let pods = ctx.pods.store().state();
        plan::node_pod_probes(&name, pods.iter().map(Arc::as_ref), &markers)
    };
    let api = Api::<NodePodProbe>::all(ctx.client.clone());
    match ctx.probes.get(&ObjectRef::new(&name)) {
        None => {
            let mut npp = NodePodProbe::new(
                &name,
                NodePodProbeSpec {
                    pod_probes: desired,
                },
            );
            npp.metadata.owner_references = Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: name.clone(),
                uid: node.uid().unwrap_or_default(),
                ..Default::default()
            }]);
            match api.create(&PostParams::default(), &npp).await {
                Ok(_) => tracing::info!(node = name, "created NodePodProbe"),
                // Not in the cache yet: look again once it is.
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    return Ok(Action::requeue(Duration::from_secs(1)));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Some(npp) if npp.spec.pod_probes != desired => {
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "podProbes": desired } })),
            )
            .await?;
            tracing::info!(
                node = name,
                pods = desired.len(),
                "NodePodProbe probes updated"
            );
        }
        Some(_) => {}
    }
    Ok(Action::await_change())
}

/// A NodePodProbe: deleted when its Node is gone; otherwise its results mark the Pods.
pub async fn results(npp: Arc<NodePodProbe>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = npp.name_any();
    if Api::<Node>::all(ctx.client.clone())
        .get_opt(&name)
        .await?
        .is_none()
    {
        Api::<NodePodProbe>::all(ctx.client.clone())
            .delete(&name, &DeleteParams::default())
            .await?;
        tracing::info!(node = name, "deleted the NodePodProbe of a deleted Node");
        return Ok(Action::await_change());
    }
    let statuses = npp.status.iter().flat_map(|s| &s.pod_probe_statuses);
    for st in statuses {
        let pod_ref = ObjectRef::<Pod>::new(&st.name).within(&st.namespace);
        let Some(pod) = ctx.pods.store().get(&pod_ref) else {
            continue;
        };
        if pod.uid().as_deref() != Some(st.uid.as_str()) {
            continue;
        }
        let markers: HashMap<String, Arc<PodProbeMarker>> = ctx
            .markers
            .state()
            .into_iter()
            .filter(|m| m.namespace().as_deref() == Some(st.namespace.as_str()))
            .map(|m| (m.name_any(), m))
            .collect();
        let pairs: Vec<_> = st
            .probe_states
            .iter()
            .filter_map(|s| {
                let (m, p) = split_node_probe_name(&s.name)?;
                let spec = markers.get(m)?.spec.probes.iter().find(|x| x.name == p)?;
                Some((spec, s))
            })
            .collect();
        apply(&pod, results::pod_marks(&pod, &pairs), &ctx).await?;
    }
    Ok(Action::await_change())
}

async fn apply(pod: &Pod, marks: results::PodMarks, ctx: &Context) -> Result<(), Error> {
    let api = Api::<Pod>::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    let pp = PatchParams::apply(CONTROLLER_NAME);
    let pp = PatchParams {
        field_manager: pp.field_manager,
        ..Default::default()
    };
    if marks.metadata.is_none() && marks.conditions.is_empty() {
        return Ok(());
    }
    // One write through `pods/status` (which may change labels and annotations too), as
    // upstream: a marker label and its condition never show apart, even when a write fails
    // and is retried. Strategic merge keys conditions by type: only these are written; a null
    // label or annotation removes it.
    let mut body = marks
        .metadata
        .clone()
        .unwrap_or_else(|| json!({"metadata": {}}));
    body["metadata"]["uid"] = json!(pod.meta().uid);
    if !marks.conditions.is_empty() {
        body["status"] = json!({ "conditions": marks.conditions });
    }
    api.patch_status(&pod.name_any(), &pp, &Patch::Strategic(&body))
        .await?;
    tracing::info!(pod = %crate::runner::object_key(pod), patch = %body, "pod marked");
    Ok(())
}
