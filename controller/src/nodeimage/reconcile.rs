//! One reconcile of a NodeImage (clean its spec, fail the tags its node never answered), and the
//! creation of a Ready node's missing NodeImage.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Secret};
use kruise_api::apps::v1beta1::{ImagePullJob, NodeImage, NodeImageSpec};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use super::context::Context;
use super::error::Error;
use super::plan::{self, Creation, Owner};

/// Shortest requeue: NodeImages change often, a tighter loop would only add load.
const MIN_REQUEUE: Duration = Duration::from_secs(3);

/// Creates the NodeImage of a Ready node, or copies the node's labels onto it. Returns how long
/// to wait when the node has not been Ready for long enough.
pub(super) async fn ensure_for_node(ctx: &Context, node: &Node) -> Result<Option<Duration>, Error> {
    let name = node.name_any();
    if node.metadata.deletion_timestamp.is_some() {
        return Ok(None);
    }
    let api: Api<NodeImage> = Api::all(ctx.client.clone());
    match api.get_opt(&name).await? {
        Some(ni) => {
            if ni.metadata.labels != node.metadata.labels
                && !(ni.labels().is_empty() && node.labels().is_empty())
            {
                // A merge patch cannot remove keys it does not name: replace the whole map.
                let mut labels: BTreeMap<String, Option<String>> =
                    ni.labels().keys().map(|k| (k.clone(), None)).collect();
                for (k, v) in node.labels() {
                    labels.insert(k.clone(), Some(v.clone()));
                }
                api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": labels}})),
                )
                .await?;
                tracing::info!(nodeimage = %name, "copied node labels to NodeImage");
            }
        }
        None => match plan::creation(node, Timestamp::now()) {
            Creation::NotReady => {}
            Creation::After(d) => return Ok(Some(d)),
            Creation::Now => {
                let mut ni = NodeImage::new(&name, NodeImageSpec::default());
                ni.metadata.labels = node.metadata.labels.clone();
                match api.create(&PostParams::default(), &ni).await {
                    Ok(_) => tracing::info!(nodeimage = %name, "created NodeImage"),
                    Err(kube::Error::Api(s)) if s.is_already_exists() => {}
                    Err(e) => return Err(e.into()),
                }
            }
        },
    }
    Ok(None)
}

async fn job_owner(client: &Client, r: &ObjectReference) -> Owner {
    let (Some(ns), Some(name)) = (r.namespace.as_deref(), r.name.as_deref()) else {
        return Owner::Gone;
    };
    match Api::<ImagePullJob>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
    {
        Ok(Some(j)) => Owner::Exists(j.metadata.uid.unwrap_or_default()),
        Ok(None) => Owner::Gone,
        Err(e) => {
            tracing::warn!(job = %name, namespace = %ns, error = %e, "cannot look up ImagePullJob");
            Owner::Unknown
        }
    }
}

pub(super) async fn reconcile(ni: Arc<NodeImage>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ni = ni.as_ref();
    let name = ni.name_any();
    let api: Api<NodeImage> = Api::all(ctx.client.clone());
    if ni.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    // Ask the API server, not the cache: deleting a live node's NodeImage loses its status.
    let node = Api::<Node>::all(ctx.client.clone()).get_opt(&name).await?;
    if node
        .as_ref()
        .is_none_or(|n| n.metadata.deletion_timestamp.is_some())
    {
        // A hand-made ("fake") NodeImage outlives its missing node and is still maintained.
        if !ni.labels().contains_key(plan::FAKE_NODEIMAGE_LABEL) {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => tracing::info!("deleted NodeImage of a gone node"),
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
            return Ok(Action::await_change());
        }
    }

    // Owners and secret copies are looked up once each per reconcile.
    let mut owners: HashMap<(String, String), Owner> = HashMap::new();
    let mut secrets: HashMap<(String, String), bool> = HashMap::new();
    for spec in ni.spec.images.values() {
        for tag in &spec.tags {
            for r in &tag.owner_references {
                let key = (
                    r.namespace.clone().unwrap_or_default(),
                    r.name.clone().unwrap_or_default(),
                );
                if let std::collections::hash_map::Entry::Vacant(slot) = owners.entry(key) {
                    slot.insert(job_owner(&ctx.client, r).await);
                }
            }
        }
        for s in &spec.pull_secrets {
            let key = (s.namespace.clone(), s.name.clone());
            if s.mode == kruise_api::apps::v1beta1::ReferenceObject::MODE_BATCH
                || secrets.contains_key(&key)
            {
                continue;
            }
            let exists = match Api::<Secret>::namespaced(ctx.client.clone(), &s.namespace)
                .get_opt(&s.name)
                .await
            {
                Ok(v) => v.is_some(),
                // Unknown: keep the reference.
                Err(_) => true,
            };
            secrets.insert(key, exists);
        }
    }
    let now = Timestamp::now();
    let cleanup = plan::clean_spec(
        ni,
        &|r| {
            let key = (
                r.namespace.clone().unwrap_or_default(),
                r.name.clone().unwrap_or_default(),
            );
            owners.get(&key).cloned().unwrap_or(Owner::Unknown)
        },
        &|s| {
            secrets
                .get(&(s.namespace.clone(), s.name.clone()))
                .copied()
                .unwrap_or(true)
        },
        now,
    );
    if let Some(images) = cleanup.images {
        let mut new = ni.clone();
        new.spec.images = images;
        // resourceVersion is kept: a concurrent writer (an ImagePullJob) makes this fail with a
        // conflict and the next reconcile starts from the fresh object.
        api.replace(&name, &PostParams::default(), &new).await?;
        tracing::info!(changes = ?cleanup.messages, "cleaned NodeImage spec");
        return Ok(Action::await_change());
    }

    let update = plan::status_timeouts(ni, now);
    if let Some(status) = update.status {
        let mut new = ni.clone();
        new.status = Some(status);
        api.replace_status(&name, &PostParams::default(), &new)
            .await?;
        tracing::info!(
            failed = update.failed.len(),
            "marked unanswered tags Failed"
        );
        for f in &update.failed {
            let note = format!(
                "Failed to pull image {} on node {} for {}",
                f.image, name, f.message
            );
            for owner in &f.owners {
                ctx.pull_failed(owner, &note).await;
            }
            ctx.pull_failed(&ni.object_ref(&()), &note).await;
        }
    }
    let requeue = [cleanup.requeue, update.requeue]
        .into_iter()
        .flatten()
        .min()
        .map(|d| d.max(MIN_REQUEUE));
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}
