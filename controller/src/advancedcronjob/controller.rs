//! Wiring of the AdvancedCronJob controller on the shared [`runner`](crate::runner): the
//! AdvancedCronJob watch, and one watch per kind of run (Job, BroadcastJob, ImageListPullJob)
//! whose store the reconcile reads and whose events wake the run's owner (upstream's
//! `watchJob`, `watchBroadcastJob`, `watchImageListPullJob`).

use std::fmt::Debug;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use kruise_api::apps::v1beta1::{AdvancedCronJob, BroadcastJob, ImageListPullJob};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use super::children;
pub use super::context::{CONTROLLER_NAME, Clock, Context, SystemClock};
use super::context::{METRIC_NAME, Runs};
pub use super::error::Error;
pub use super::reconcile::reconcile;
use crate::registry::{self, Shared};
use crate::runner::{self, Controller};

/// Reconciles of different AdvancedCronJobs at once (upstream's `--advancedcronjob-workers`
/// default).
const CONCURRENCY: u16 = 3;

/// A store of every `K` and the owners its events concern.
fn runs_of<K>(
    api: Api<K>,
) -> (
    Store<K>,
    impl Stream<Item = ObjectRef<AdvancedCronJob>> + Send + 'static,
)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let events = reflector::reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .touched_objects()
        .filter_map(|ev: Result<K, watcher::Error>| {
            futures::future::ready(match ev {
                Ok(obj) => owner_of(obj.meta()),
                Err(e) => {
                    tracing::debug!(error = %e, "run watch error");
                    None
                }
            })
        });
    (store, events)
}

/// The AdvancedCronJob a run belongs to.
fn owner_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<ObjectRef<AdvancedCronJob>> {
    let owner = children::controller_ref(meta)?;
    Some(ObjectRef::new(&owner.name).within(meta.namespace.as_deref().unwrap_or_default()))
}

/// The registry's entry (always on).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: METRIC_NAME,
    enabled: registry::always,
    start: |shared| Box::pin(run(shared.clone())),
};

/// Run the AdvancedCronJob controller until `shutdown` is cancelled.
pub async fn run(shared: Shared) {
    let (jobs, job_events) = runs_of::<Job>(shared.watched());
    let (broadcastjobs, bcj_events) = runs_of::<BroadcastJob>(shared.watched());
    let (imagelistpulljobs, ilpj_events) = runs_of::<ImageListPullJob>(shared.watched());
    let runs = Runs {
        jobs,
        broadcastjobs,
        imagelistpulljobs,
    };
    let acjs: Api<AdvancedCronJob> = shared.watched();
    let ctx = Arc::new(Context::new(&shared, runs));
    let ctl = Controller::watching(
        METRIC_NAME,
        runner::watch(acjs),
        ctx.metrics.clone(),
        shared.shutdown,
    );
    ctx.metrics.workloads.advancedcronjobs.set(ctl.store());
    ctl.concurrency(CONCURRENCY)
        .backoff(ctx.backoff.clone())
        .trigger_refs(job_events)
        .trigger_refs(bcj_events)
        .trigger_refs(ilpj_events)
        .run(reconcile, ctx)
        .await;
}
