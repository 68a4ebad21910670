//! The NodeImage controller: one NodeImage per Node, named after it.
//!
//! - A Node that has been Ready for [`logic::CREATION_DELAY_AFTER_READY`] gets a NodeImage
//!   carrying the node's labels (ImagePullJob label selectors match on them); label changes are
//!   copied over. A NodeImage whose Node is gone is deleted (unless labelled
//!   `apps.kruise.io/fake-nodeimage`).
//! - Tags whose ImagePullJob owners are gone, tags past their TTL, old-style pull-secret
//!   references whose copy is gone and images without tags are removed from the spec.
//! - Tags the daemon never answered for (or that outlive their activeDeadlineSeconds) are marked
//!   Failed in the status; everything else in the status belongs to the daemon.
//!
//! Entry point: [`run`]`(client, metrics, shutdown)`; it watches Nodes, NodeImages and
//! ImagePullJobs itself (none of them is in a shared cache). RBAC: `nodes` get/list/watch;
//! `nodeimages` get/list/watch/create/update/patch/delete; `nodeimages/status` update;
//! `imagepulljobs` get/list/watch; `secrets` get (namespace kruise-daemon-config);
//! `events.k8s.io events` create.

pub mod logic;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use crate::events::Recorder;
use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Secret};
use kruise_api::apps::v1beta1::{ImagePullJob, NodeImage, NodeImageSpec};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, ReconcileRequest};
use kube::runtime::events::{Event, EventType, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::runner::{self, Controller};
use logic::{Creation, Owner};

const NAME: &str = "nodeimage";
const CONCURRENCY: u16 = 3;
/// Shortest requeue: NodeImages change often, a tighter loop would only add load.
const MIN_REQUEUE: Duration = Duration::from_secs(3);
const CONTROLLER_NAME: &str = "nodeimage-controller";

/// The controller has no failure kind of its own: its error is a failed API call.
pub use crate::runner::KubeError as Error;

struct Ctx {
    client: Client,
    nodes: reflector::Store<Node>,
    recorder: Recorder,
}

/// Runs until `shutdown`.
pub async fn run(client: Client, metrics: Arc<Metrics>, shutdown: CancellationToken) {
    let (nodes, node_writer) = reflector::store::<Node>();
    let node_events = runner::watch(Api::<Node>::all(client.clone()))
        .reflect(node_writer)
        .touched_objects();
    let ctl = Controller::watching(
        NAME,
        runner::watch(Api::<NodeImage>::all(client.clone())),
        metrics,
        shutdown.clone(),
    )
    .concurrency(CONCURRENCY);
    // A Node event concerns the NodeImage of the same name, which may not exist yet: those are
    // handled by `ensure_for_node` below, outside the applier (it only sees cached objects).
    let (node_tx, node_rx) = futures::channel::mpsc::unbounded::<Arc<Node>>();
    let retry_tx = node_tx.clone();
    let node_triggers = node_events.filter_map(move |ev| {
        let tx = node_tx.clone();
        async move {
            match ev {
                Ok(n) => {
                    let name = n.name_any();
                    let _ = tx.unbounded_send(Arc::new(n));
                    Some(Ok(ReconcileRequest::from(ObjectRef::<NodeImage>::new(
                        &name,
                    ))))
                }
                Err(e) => Some(Err(e)),
            }
        }
    });
    // A deleted job concerns every NodeImage that carries one of its tags.
    let job_store = ctl.store();
    let job_events = runner::watch(Api::<ImagePullJob>::all(client.clone())).flat_map(move |ev| {
        let refs: Vec<ObjectRef<NodeImage>> = match &ev {
            Ok(watcher::Event::Delete(job)) => {
                let uid = job.metadata.uid.clone().unwrap_or_default();
                job_store
                    .state()
                    .iter()
                    .filter(|ni| owned_by(ni, &uid))
                    .map(|ni| ObjectRef::from_obj(ni.as_ref()))
                    .collect()
            }
            _ => Vec::new(),
        };
        futures::stream::iter(refs)
    });

    let ctx = Arc::new(Ctx {
        client: client.clone(),
        nodes: nodes.clone(),
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: CONTROLLER_NAME.into(),
                instance: std::env::var("POD_NAME").ok(),
            },
        ),
    });

    let creator_ctx = ctx.clone();
    let creator_shutdown = shutdown.clone();
    let creator = async move {
        let nodes_synced = creator_ctx.nodes.wait_until_ready();
        let _ = nodes_synced.await;
        node_rx
            .take_until(creator_shutdown.cancelled_owned())
            .for_each_concurrent(usize::from(CONCURRENCY), |node| {
                let ctx = creator_ctx.clone();
                let retry_tx = retry_tx.clone();
                async move {
                    let wait = match ensure_for_node(&ctx, &node).await {
                        Ok(w) => w,
                        Err(e) => {
                            tracing::warn!(node = %node.name_any(), error = %e, "failed to ensure NodeImage");
                            Some(Duration::from_secs(5))
                        }
                    };
                    if let Some(wait) = wait {
                        // Look again later with the cached (freshest) copy of the node.
                        tokio::spawn(async move {
                            tokio::time::sleep(wait + Duration::from_millis(200)).await;
                            if let Some(n) = ctx.nodes.get(&ObjectRef::new(&node.name_any())) {
                                let _ = retry_tx.unbounded_send(n);
                            }
                        });
                    }
                }
            })
            .await;
    };

    let controller = ctl
        .trigger(node_triggers)
        .trigger_refs(job_events)
        .run(reconcile, ctx);
    tokio::join!(controller, creator);
}

fn owned_by(ni: &NodeImage, uid: &str) -> bool {
    ni.spec.images.values().any(|i| {
        i.tags.iter().any(|t| {
            t.owner_references
                .iter()
                .any(|r| r.uid.as_deref() == Some(uid))
        })
    })
}

/// Creates the NodeImage of a Ready node, or copies the node's labels onto it. Returns how long
/// to wait when the node has not been Ready for long enough.
async fn ensure_for_node(ctx: &Ctx, node: &Node) -> Result<Option<Duration>, Error> {
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
        None => match logic::creation(node, Timestamp::now()) {
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

async fn reconcile(ni: Arc<NodeImage>, ctx: Arc<Ctx>) -> Result<Action, Error> {
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
        if !ni.labels().contains_key(logic::FAKE_NODEIMAGE_LABEL) {
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
    let cleanup = logic::clean_spec(
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

    let update = logic::status_timeouts(ni, now);
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
                publish(&ctx, owner, &note).await;
            }
            publish(&ctx, &ni.object_ref(&()), &note).await;
        }
    }
    let requeue = [cleanup.requeue, update.requeue]
        .into_iter()
        .flatten()
        .min()
        .map(|d| d.max(MIN_REQUEUE));
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}

async fn publish(ctx: &Ctx, r: &ObjectReference, note: &str) {
    let ev = Event {
        type_: EventType::Warning,
        reason: "PullImageFailed".into(),
        note: Some(note.to_string()),
        action: "PullImage".into(),
        secondary: None,
    };
    crate::events::publish_event(&ctx.recorder, &ev, r).await;
}
