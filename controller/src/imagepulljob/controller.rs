//! Wiring of the ImagePullJob controller (the job watch; NodeImage, Pod and pull-secret events
//! mapped to the jobs they concern) and of the ImageListPullJob controller beside it.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::{ImagePullJob, NodeImage};
use kruise_api::features::Gate;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef};
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::context::{Context, METRIC_NAME, pods_on_node};
use super::reconcile::reconcile;
use super::{follow, list, plan};
use crate::expectations::ResourceVersionExpectations;
use crate::metrics::Metrics;
use crate::podcache::{PodCache, PodEvent};
use crate::registry::{self, Shared};
use crate::runner::{self, Controller};

/// Jobs handled at once.
const CONCURRENCY: u16 = 3;

/// The registry's entry (started when its feature gate allows).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: "imagepulljob and imagelistpulljob",
    // The daemon pulls the images.
    enabled: |gates| gates.enabled(Gate::KruiseDaemon) && gates.enabled(Gate::ImagePullJobGate),
    start: |shared| Box::pin(run(shared.clone())),
};

/// Runs the ImagePullJob and ImageListPullJob controllers until the shared shutdown token is
/// cancelled.
pub async fn run(shared: Shared) {
    let Shared {
        client,
        pods,
        metrics,
        shutdown,
        ..
    } = shared;
    let jobs = run_jobs(client.clone(), pods, metrics.clone(), shutdown.clone());
    let lists = list::run(client, metrics, shutdown);
    tokio::join!(jobs, lists);
}

async fn run_jobs(
    client: Client,
    pods: PodCache,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let ctl = Controller::watching(
        METRIC_NAME,
        runner::watch(Api::<ImagePullJob>::all(client.clone())),
        metrics.clone(),
        shutdown,
    )
    .concurrency(CONCURRENCY);
    let jobs = ctl.store();
    metrics.workloads.imagepulljobs.set(jobs.clone());
    let (node_images, ni_writer) = reflector::store::<NodeImage>();

    // A NodeImage change concerns the jobs owning its tags, and running jobs that may want to
    // add this node (a new node, new labels, a pod scheduled there).
    let (store, pod_cache) = (jobs.clone(), pods.clone());
    let ni_events = runner::watch(Api::<NodeImage>::all(client.clone()))
        .reflect(ni_writer)
        .touched_objects()
        .flat_map(move |ev| {
            let Ok(ni) = ev else {
                return futures::stream::iter(Vec::new());
            };
            let mut refs: Vec<ObjectRef<ImagePullJob>> = ni
                .spec
                .images
                .values()
                .flat_map(|i| i.tags.iter())
                .flat_map(|t| t.owner_references.iter())
                .filter_map(|r| {
                    Some(ObjectRef::new(r.name.as_deref()?).within(r.namespace.as_deref()?))
                })
                .collect();
            let running: Vec<Arc<ImagePullJob>> = store
                .state()
                .into_iter()
                .filter(|j| plan::is_running(j))
                .collect();
            let on_node = if running
                .iter()
                .any(|j| j.spec.template.pod_selector.is_some())
            {
                pods_on_node(&pod_cache, &ni.name_any())
            } else {
                Vec::new()
            };
            refs.extend(
                running
                    .iter()
                    .filter(|j| plan::job_may_target(j, &ni, &on_node))
                    .map(|j| ObjectRef::from_obj(j.as_ref())),
            );
            refs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
            refs.dedup();
            futures::stream::iter(refs)
        });

    // A pod change concerns running podSelector jobs of its namespace that select it.
    let store = jobs.clone();
    let pod_events = pods.targets(move |ev| {
        let selected = |pod: Option<&Pod>| -> Vec<ObjectRef<ImagePullJob>> {
            store
                .state()
                .into_iter()
                .filter(|j| plan::is_running(j))
                .filter(|j| {
                    let Some(ps) = &j.spec.template.pod_selector else {
                        return false;
                    };
                    pod.is_none_or(|p| {
                        p.metadata.namespace == j.metadata.namespace
                            && kruise_api::selector::matches(&ps.label_selector(), p.labels())
                    })
                })
                .map(|j| ObjectRef::from_obj(j.as_ref()))
                .collect()
        };
        match ev {
            PodEvent::Applied(p) | PodEvent::Deleted(p) => selected(Some(p)),
            PodEvent::Resync => selected(None),
        }
    });

    // A pull secret's source changed: the jobs using it rewrite their copies.
    let secret_events = follow::requests(client.clone(), jobs.clone());

    let ctx = Arc::new(Context {
        client,
        pods,
        node_images,
        rv_exp: ResourceVersionExpectations::new(),
        extra_ttl_for_always: 0,
    });
    ctl.trigger_refs(ni_events)
        .trigger_refs(pod_events)
        .trigger_refs(secret_events)
        .run(reconcile, ctx)
        .await;
}
