//! The CloneSet reconcile shell: read the CloneSet, its pods (shared cache), PVCs and
//! ControllerRevisions; wait for expectations; scale or update one step; write status.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, future};
use jiff::Timestamp;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod,
    PodReadinessGate, PodTemplateSpec, Volume,
};
use kruise_api::apps::v1beta1::{
    CloneSet, CloneSetPodUpdateStrategyType, CloneSetStatus, CloneSetUpdateStrategyType,
};
use kruise_api::appspub::{Lifecycle, LifecycleHook, LifecycleStateType};
use kruise_api::keys;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, ReconcileRequest, trigger_self};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher::{self, watcher};
use kube::runtime::{WatchStreamExt, applier};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::diff::{self, Rolling, Settings};
use super::{claim, podutil, scale, status, update};
use crate::backoff::{self, Backoff, Policy};
use crate::expectations::{
    Cached, EXPECTATION_TIMEOUT, ResourceVersionExpectations, ScaleAction, ScaleExpectations,
    ScaleSatisfaction, VersionSatisfaction,
};
use crate::inplace::{
    ApplyError, CloneSetHooks, InPlaceControl, InPlaceHooks, NotInPlace, UpdateOptions,
    UpdateOutcome,
};
use crate::metrics::Metrics;
use crate::podcache::{PodCache, PodEvent};
use crate::revision::{self, Parent, RevisionError, UpdateRevisionChoice};

/// Name in Events, logs and the field manager.
pub const CONTROLLER_NAME: &str = "cloneset-controller";
/// Label value of the `controller` metric label.
const METRIC_NAME: &str = "cloneset";
/// Pod creations start with this many at once and double while they succeed.
const INITIAL_CREATE_BATCH: usize = 1;
/// Reconciles of different CloneSets running at once (upstream's default worker count).
const CONCURRENCY: u16 = 3;
/// Pod creations of a CloneSet after a failed one: an event-triggered reconcile (every Pod
/// event of the CloneSet triggers one) would otherwise retry the creation each time, which in a
/// namespace being deleted meant about ten refused creates a second. A failed create is an API
/// write and a Warning Event; the first retry comes after 1 s, doubling up to the usual cap.
const CREATE_BACKOFF: Policy = Policy {
    base: Duration::from_secs(1),
    cap: Policy::DEFAULT.cap,
};
/// Longest wait for unsatisfied scale expectations before looking at the cache again; events
/// and resyncs normally end the wait much sooner.
const EXPECTATION_RECHECK: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Revision(#[from] RevisionError),
    #[error("in-place update: {0}")]
    InPlace(#[from] ApplyError),
    #[error("serialization: {0}")]
    Serde(#[from] serde_json::Error),
    #[error("CloneSet has no namespace or uid")]
    Unnamed,
    #[error("pod {pod} is in lifecycle state {state} and cannot be updated in place")]
    BadLifecycle { pod: String, state: String },
    #[error(
        "pod {pod}: update strategy is InPlaceOnly but it cannot be updated in place: {reason}"
    )]
    InPlaceOnly { pod: String, reason: NotInPlace },
    #[error("revision template: {0}")]
    Template(String),
    #[error("KruisePodReady condition of pod {pod}: {source}")]
    Readiness {
        pod: String,
        source: kruise_api::Error,
    },
}

impl Error {
    /// The text a condition shows: the API server's own message for a refused request (what
    /// upstream shows), not the client's debug rendering of the whole Status.
    fn condition_message(&self) -> String {
        match self {
            Error::Kube(kube::Error::Api(status)) if !status.message.is_empty() => {
                status.message.clone()
            }
            e => e.to_string(),
        }
    }

    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Revision(_) => "revision",
            Error::InPlace(_) => "inplace",
            Error::Serde(_) => "serde",
            Error::Unnamed => "unnamed",
            Error::BadLifecycle { .. } => "lifecycle",
            Error::InPlaceOnly { .. } => "inplace_only",
            Error::Template(_) => "template",
            Error::Readiness { .. } => "readiness",
        }
    }
}

/// Shared state of the CloneSet controller.
pub struct Context {
    pub client: Client,
    pub pods: PodCache,
    pub recorder: Recorder,
    pub scale_exp: ScaleExpectations,
    pub rv_exp: ResourceVersionExpectations,
    pub inplace: InPlaceControl,
    pub metrics: Arc<Metrics>,
    /// Only CloneSets in this namespace (all when `None`).
    pub namespace: Option<String>,
    /// Failed reconciles per CloneSet (the error policy's delays).
    pub backoff: Arc<Backoff>,
    /// Failed Pod creations per CloneSet (see [`CREATE_BACKOFF`]).
    pub create_backoff: Backoff,
}

impl Context {
    pub fn new(
        client: Client,
        pods: PodCache,
        metrics: Arc<Metrics>,
        instance: Option<String>,
        namespace: Option<String>,
    ) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER_NAME.to_string(),
            instance,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            inplace: InPlaceControl::new(client.clone()),
            client,
            pods,
            scale_exp: ScaleExpectations::new(),
            rv_exp: ResourceVersionExpectations::new(),
            metrics,
            namespace,
            backoff: Arc::new(Backoff::new(Policy::DEFAULT)),
            create_backoff: Backoff::new(CREATE_BACKOFF),
        }
    }

    /// Observes the scale expectations of `key` (`namespace/name`) that the Pod cache already
    /// shows, whether or not their events reached us.
    fn observe_from_cache(&self, key: &str) -> usize {
        let Some((ns, _)) = key.split_once('/') else {
            return 0;
        };
        let store = self.pods.store();
        self.scale_exp.observe_cache(key, |name| {
            match store.get(&ObjectRef::<Pod>::new(name).within(ns)) {
                None => Cached::Absent,
                Some(p) if p.metadata.deletion_timestamp.is_some() => Cached::Terminating,
                Some(_) => Cached::Present,
            }
        })
    }

    /// Publish an Event on the CloneSet. `related` (the pod, PVC or revision concerned) also keeps
    /// events about different objects from being folded into one series.
    async fn event(
        &self,
        cs: &CloneSet,
        type_: EventType,
        reason: &str,
        note: String,
        related: Option<ObjectReference>,
    ) {
        let ev = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: reason.to_string(),
            secondary: related,
        };
        match self.recorder.publish(&ev, &cs.object_ref(&())).await {
            Ok(()) => {}
            // A terminating namespace refuses new events; that is expected, not worth a warning.
            Err(kube::Error::Api(s))
                if s.is_forbidden() && s.message.contains("being terminated") =>
            {
                tracing::debug!(cloneset = %cs.name_any(), reason, "event refused");
            }
            Err(e) => {
                tracing::warn!(cloneset = %cs.name_any(), error = %e, reason, "failed to publish event");
            }
        }
    }

    /// [`Self::event`] about `obj`, a pod, PVC or revision of the CloneSet.
    async fn event_about<K: Resource<DynamicType = ()>>(
        &self,
        cs: &CloneSet,
        obj: &K,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        self.event(cs, type_, reason, note, Some(obj.object_ref(&())))
            .await;
    }

    /// The outcome of a write to `pvc`: `Ok(true)` when done, `Ok(false)` when the PVC is
    /// already gone (nothing left to do); any other error is published as a Warning Event
    /// (`reason`, `note`) and returned.
    async fn pvc_written<T>(
        &self,
        cs: &CloneSet,
        pvc: &PersistentVolumeClaim,
        res: Result<T, kube::Error>,
        reason: &str,
        note: impl FnOnce(&kube::Error) -> String,
    ) -> Result<bool, Error> {
        match res {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.is_not_found() => Ok(false),
            Err(e) => {
                self.event_about(cs, pvc, EventType::Warning, reason, note(&e))
                    .await;
                Err(e.into())
            }
        }
    }

    /// Remember the resource version one of our writes produced, so the next reconcile waits
    /// until the cache shows it.
    fn expect_version(&self, uid: Option<&str>, rv: Option<&str>) {
        if let (Some(uid), Some(rv)) = (uid, rv) {
            self.rv_exp.expect(uid, rv);
        }
    }

    fn expect_written(&self, written: &Pod) {
        self.expect_version(
            written.metadata.uid.as_deref(),
            written.metadata.resource_version.as_deref(),
        );
    }
}

/// Which part of a pod a patch writes.
#[derive(Clone, Copy)]
enum PodPart {
    Object,
    Status,
}

/// Strategic-merge `patch` into `pod` (or its status subresource).
async fn patch_pod(
    api: &Api<Pod>,
    pod: &Pod,
    part: PodPart,
    patch: Value,
) -> Result<Pod, kube::Error> {
    let (name, params, patch) = (
        podutil::name(pod),
        PatchParams::default(),
        Patch::Strategic(patch),
    );
    match part {
        PodPart::Object => api.patch(name, &params, &patch).await,
        PodPart::Status => api.patch_status(name, &params, &patch).await,
    }
}

/// Set a failure condition (FailedScale, FailedUpdate) from the step's error, or clear it.
fn report_failure(st: &mut CloneSetStatus, type_: &str, err: Option<&Error>, now: Timestamp) {
    match err {
        Some(e) => status::set_condition(
            st,
            status::new_condition(type_, true, "", &e.condition_message(), now),
        ),
        None => status::remove_condition(st, type_),
    }
}

/// How many pods of one CloneSet are written to at once during an update (each write is a few
/// API calls; the client's rate limit, not this, bounds the load on the API server).
const POD_WRITE_CONCURRENCY: usize = 16;

/// Runs `futs` at most [`POD_WRITE_CONCURRENCY`] at a time, each slot refilled as soon as its
/// future finishes, and returns the outputs in the order of `futs`. The order matters: the first
/// error a condition reports is then always the same Pod's, so the condition does not flip between
/// Pods (each flip would be a status write that triggers the next reconcile at once).
async fn concurrently_in_order<T, F: Future<Output = T>>(futs: Vec<F>) -> Vec<T> {
    let mut out: Vec<(usize, T)> = futures::stream::iter(
        futs.into_iter()
            .enumerate()
            .map(|(i, f)| async move { (i, f.await) }),
    )
    .buffer_unordered(POD_WRITE_CONCURRENCY)
    .collect()
    .await;
    out.sort_unstable_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, t)| t).collect()
}

/// The shortest requeue anyone asked for during a reconcile.
#[derive(Default)]
struct Requeue(Option<Duration>);

impl Requeue {
    fn push(&mut self, d: Option<Duration>) {
        if let Some(d) = d.filter(|d| !d.is_zero()) {
            self.0 = Some(self.0.map_or(d, |cur| cur.min(d)));
        }
    }
    fn action(&self) -> Action {
        self.0.map_or_else(Action::await_change, Action::requeue)
    }
}

/// Run the CloneSet controller until `shutdown` is cancelled.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let (reader, writer) = reflector::store::<CloneSet>();
    let api: Api<CloneSet> = match &ctx.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let exp_ctx = ctx.clone();
    let cs_store = reader.clone();
    let cs_events = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .inspect(move |ev| forget_deleted(&exp_ctx, &cs_store, ev))
        .applied_objects();
    let self_triggers = trigger_self(cs_events, ());

    let pod_ctx = ctx.clone();
    let store = reader.clone();
    let pod_triggers = ctx.pods.events().flat_map(move |ev| {
        let refs = pod_event_targets(&pod_ctx, &store, ev);
        futures::stream::iter(
            refs.into_iter()
                .map(|r| Ok::<_, watcher::Error>(ReconcileRequest::from(r))),
        )
    });

    let queue =
        futures::stream::select(self_triggers, pod_triggers).take_until(shutdown.cancelled_owned());
    let cfg = kube::runtime::Config::default().concurrency(CONCURRENCY);
    let backoff = ctx.backoff.clone();
    applier(
        backoff::reset_on_success(backoff.clone(), reconcile),
        backoff::requeue_with_backoff_at_least(backoff, retry_floor, error_policy),
        ctx,
        reader,
        queue,
        cfg,
    )
    .for_each(|res| {
        match res {
            Ok((obj, _)) => tracing::debug!(cloneset = %obj, "reconciled"),
            Err(e) => tracing::debug!(error = %e, "reconcile failed"),
        }
        future::ready(())
    })
    .await;
    tracing::info!("cloneset controller stopped");
}

/// A deleted CloneSet will never be reconciled again: drop what it expected. After a relist
/// (`InitDone`), CloneSets deleted during the watch gap are dropped too.
fn forget_deleted(
    ctx: &Context,
    store: &reflector::Store<CloneSet>,
    ev: &Result<watcher::Event<CloneSet>, watcher::Error>,
) {
    match ev {
        Ok(watcher::Event::Delete(cs)) => {
            let key = format!("{}/{}", cs.namespace().unwrap_or_default(), cs.name_any());
            ctx.scale_exp.delete(&key);
            ctx.create_backoff.reset(&key);
        }
        Ok(watcher::Event::InitDone) => {
            ctx.scale_exp.retain_keys(|key| {
                key.split_once('/').is_some_and(|(ns, name)| {
                    store
                        .get(&ObjectRef::<CloneSet>::new(name).within(ns))
                        .is_some()
                })
            });
        }
        _ => {}
    }
}

/// Which CloneSets a pod event concerns; observes scale expectations on the way.
fn pod_event_targets(
    ctx: &Context,
    store: &reflector::Store<CloneSet>,
    ev: PodEvent,
) -> Vec<ObjectRef<CloneSet>> {
    let (pod, deleted) = match ev {
        PodEvent::Applied(p) => (p, false),
        PodEvent::Deleted(p) => (p, true),
        PodEvent::Resync => {
            // The events we missed are lost, the store is not: settle every pending expectation
            // against it before the CloneSets reconcile.
            for key in ctx.scale_exp.keys() {
                let n = ctx.observe_from_cache(&key);
                if n > 0 {
                    tracing::debug!(cloneset = %key, observed = n, "scale expectations observed from the cache after a resync");
                }
            }
            let live: BTreeSet<String> = ctx
                .pods
                .store()
                .state()
                .iter()
                .filter_map(|p| p.metadata.uid.clone())
                .collect();
            ctx.rv_exp.retain(|uid| live.contains(uid));
            return store
                .state()
                .iter()
                .map(|cs| ObjectRef::from_obj(cs.as_ref()))
                .collect();
        }
    };
    let Some(owner) = pod
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.iter().find(|o| o.controller == Some(true)))
    else {
        // An orphan concerns every CloneSet of its namespace that selects it (adoption).
        let ns = pod.metadata.namespace.as_deref();
        let empty = Default::default();
        let labels = podutil::labels(&pod).unwrap_or(&empty);
        return store
            .state()
            .iter()
            .filter(|cs| cs.metadata.namespace.as_deref() == ns)
            .filter(|cs| update::selector_matches(&cs.spec.selector, labels))
            .map(|cs| ObjectRef::from_obj(cs.as_ref()))
            .collect();
    };
    if owner.kind != CloneSet::kind(&()) || !owner.api_version.starts_with(keys::APPS_GROUP) {
        return Vec::new();
    }
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let key = format!("{ns}/{}", owner.name);
    // Whatever the event, the store (updated before it was sent) tells what became of the pod:
    // there (its create is seen), terminating (its create and its delete are seen) or gone.
    let cached = match ctx.pods.store().get(&ObjectRef::from_obj(pod.as_ref())) {
        None => Cached::Absent,
        Some(p) if p.metadata.deletion_timestamp.is_some() => Cached::Terminating,
        Some(_) => Cached::Present,
    };
    for action in [ScaleAction::Create, ScaleAction::Delete] {
        // A delete event also proves the pod was created, even if we never saw it before.
        if cached.shows(action) || deleted {
            ctx.scale_exp.observe(&key, action, podutil::name(&pod));
        }
    }
    // A pod that is gone will not be seen again: forget what we expected of its version.
    if cached == Cached::Absent
        && let Some(uid) = pod.metadata.uid.as_deref()
    {
        ctx.rv_exp.delete(uid);
    }
    vec![ObjectRef::new(&owner.name).within(&ns)]
}

/// The soonest retry of errors that only a change of the CloneSet or its Pods can fix
/// (InPlaceOnly, a bad lifecycle state, a bad template): that change triggers a reconcile by
/// itself, so retrying sooner would only repeat the refusal and its Warning Event.
const SPEC_ERROR_RETRY: Duration = Duration::from_secs(30);

fn retry_floor(err: &Error) -> Duration {
    match err {
        Error::InPlaceOnly { .. } | Error::BadLifecycle { .. } | Error::Template(_) => {
            SPEC_ERROR_RETRY
        }
        _ => Duration::ZERO,
    }
}

/// Logs a failed reconcile; the retry comes after the CloneSet's backoff delay
/// ([`backoff::requeue_with_backoff_at_least`]), and not before [`retry_floor`].
fn error_policy(cs: &CloneSet, err: &Error, retry_in: Duration) {
    tracing::warn!(
        cloneset = %cs.name_any(),
        namespace = cs.namespace().unwrap_or_default(),
        error = %err,
        retry_in_ms = u64::try_from(retry_in.as_millis()).unwrap_or(u64::MAX),
        "reconcile failed"
    );
}

/// The namespace is being deleted: nothing can be created there any more, and everything in it
/// is going away, so there is nothing to retry.
fn namespace_terminating(err: &Error) -> bool {
    matches!(err, Error::Kube(kube::Error::Api(s)) if s.is_forbidden() && s.message.contains("being terminated"))
}

async fn reconcile(cs: Arc<CloneSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let res = match reconcile_inner(&cs, &ctx).await {
        Err(e) if namespace_terminating(&e) => {
            tracing::debug!(cloneset = %cs.name_any(), "namespace is terminating; not retrying");
            Ok(Action::await_change())
        }
        other => other,
    };
    ctx.metrics.reconciled(
        METRIC_NAME,
        started.elapsed(),
        res.as_ref().err().map(Error::metric_label),
    );
    tracing::debug!(
        cloneset = %cs.name_any(),
        namespace = cs.namespace().unwrap_or_default(),
        took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        ok = res.is_ok(),
        "finished syncing CloneSet"
    );
    res
}

pub fn settings_of(cs: &CloneSet) -> Settings {
    let rolling = cs
        .spec
        .update_strategy
        .rolling_update
        .as_ref()
        .map(|r| Rolling {
            partition: r.partition.clone(),
            max_unavailable: r.max_unavailable.clone(),
            max_surge: r.max_surge.clone(),
            paused: r.paused,
        });
    Settings {
        replicas: cs.spec.replicas.unwrap_or(1),
        rolling,
        scale_max_unavailable: cs.spec.scale_strategy.max_unavailable.clone(),
        pods_to_delete: cs.spec.scale_strategy.pods_to_delete.clone(),
        min_ready_seconds: cs.spec.min_ready_seconds,
        exclude_preparing_delete: cs.spec.scale_strategy.exclude_preparing_delete
            || cs
                .labels()
                .get(keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_LABEL)
                .is_some_and(|v| v == "true"),
    }
}

fn pod_update_policy(cs: &CloneSet) -> CloneSetPodUpdateStrategyType {
    cs.spec
        .update_strategy
        .rolling_update
        .as_ref()
        .and_then(|r| r.pod_update_policy)
        .unwrap_or_default()
}

pub fn update_options(cs: &CloneSet) -> UpdateOptions {
    let rolling = cs.spec.update_strategy.rolling_update.as_ref();
    UpdateOptions {
        grace_period_seconds: rolling
            .and_then(|r| r.in_place_update_strategy.as_ref())
            .map_or(0, |s| s.grace_period_seconds),
        ignore_volume_claim_templates_hash_diff: pod_update_policy(cs)
            == CloneSetPodUpdateStrategyType::InPlaceOnly,
        ..Default::default()
    }
}

fn template_labels(cs: &CloneSet) -> BTreeMap<String, String> {
    cs.spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
}

/// Why a CloneSet cannot be acted on at all, if it cannot.
fn invalid_reason(cs: &CloneSet) -> Option<String> {
    let sel = &cs.spec.selector;
    let empty = sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && sel.match_expressions.as_ref().is_none_or(|e| e.is_empty());
    if empty {
        return Some("spec.selector is empty; it must select the template's labels".to_string());
    }
    for e in sel.match_expressions.iter().flatten() {
        if !["In", "NotIn", "Exists", "DoesNotExist"].contains(&e.operator.as_str()) {
            return Some(format!(
                "spec.selector has an unknown operator {:?}",
                e.operator
            ));
        }
    }
    if !update::selector_matches(sel, &template_labels(cs)) {
        return Some("spec.selector does not match spec.template.metadata.labels".to_string());
    }
    if cs.spec.replicas.is_some_and(|r| r < 0) {
        return Some("spec.replicas is negative".to_string());
    }
    None
}

/// Asks the nodes of the CloneSet's Pods to pull the new images before the in-place update
/// reaches them (upstream's pre-download). Best effort: a failure is logged and never blocks the
/// rollout.
async fn predownload_images(
    ctx: &Context,
    cs: &CloneSet,
    current: &ControllerRevision,
    update: &ControllerRevision,
) {
    let in_place = InPlaceControl::can_update_in_place(
        &CloneSetHooks,
        Some(current),
        update,
        &update_options(cs),
    )
    .is_ok();
    match crate::imagepulljob::predownload::ensure_predownload_jobs(
        &ctx.client,
        cs,
        current,
        update,
        in_place,
    )
    .await
    {
        Ok(out) => {
            for job in out.created {
                ctx.event(
                    cs,
                    EventType::Normal,
                    "CreatedImagePullJob",
                    format!("created ImagePullJob {job} to pre-download the new images"),
                    None,
                )
                .await;
            }
        }
        Err(e) => {
            tracing::warn!(cloneset = %cs.name_any(), error = %e, "image pre-download failed")
        }
    }
}

async fn reconcile_inner(cs: &CloneSet, ctx: &Context) -> Result<Action, Error> {
    let ns = cs.namespace().ok_or(Error::Unnamed)?;
    let name = cs.name_any();
    let uid = cs.uid().ok_or(Error::Unnamed)?;
    let key = format!("{ns}/{name}");
    let now = Timestamp::now();
    let clock = Instant::now();
    let mut requeue = Requeue::default();

    if let Some(reason) = invalid_reason(cs) {
        // Nothing will change until the spec does; say so where `kubectl describe` shows it.
        ctx.event(cs, EventType::Warning, "InvalidSpec", reason.clone(), None)
            .await;
        let mut st = cs.status.clone().unwrap_or_default();
        st.observed_generation = cs.metadata.generation.unwrap_or_default();
        status::set_condition(
            &mut st,
            status::new_condition(
                keys::CLONESET_CONDITION_FAILED_SCALE,
                true,
                "InvalidSpec",
                &reason,
                now,
            ),
        );
        write_status(ctx, cs, &st).await?;
        return Ok(Action::await_change());
    }

    ctx.observe_from_cache(&key);
    match ctx.scale_exp.satisfied(&key, clock) {
        ScaleSatisfaction::Satisfied => {}
        ScaleSatisfaction::Unsatisfied { since, dirty } => {
            if since < EXPECTATION_TIMEOUT {
                tracing::debug!(cloneset = %key, ?dirty, "scale expectations not satisfied yet");
                return Ok(Action::requeue(
                    (EXPECTATION_TIMEOUT - since).min(EXPECTATION_RECHECK),
                ));
            }
            // A lost watch event must not freeze the CloneSet forever.
            tracing::warn!(cloneset = %key, ?dirty, "scale expectations timed out; dropping them");
            ctx.metrics
                .scale_expectation_leakage
                .get_or_create(&crate::metrics::WorkloadLabels {
                    controller: METRIC_NAME.to_string(),
                    namespace: ns.clone(),
                    name: name.clone(),
                })
                .inc();
            ctx.scale_exp.delete(&key);
        }
    }

    let owned = claim_pods(ctx, cs, &ns, &uid).await?;
    let (mut active, inactive): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) =
        owned.into_iter().partition(|p| podutil::is_active(p));
    active.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut pvcs = owned_pvcs(ctx, cs, &ns, &uid).await?;
    if !cs.spec.scale_strategy.enable_pvc_reuse && !pvcs.is_empty() {
        pvcs = cleanup_pvcs(ctx, cs, &ns, &active, &inactive, pvcs).await?;
    }

    let rev_api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let mut revisions = list_revisions(&rev_api, cs, &uid).await?;
    revision::sort_revisions(&mut revisions);
    let (current, update_rev, collision) =
        active_revisions(ctx, cs, &rev_api, &mut revisions).await?;
    let update_name = update_rev.metadata.name.clone().unwrap_or_default();
    let current_name = current.metadata.name.clone().unwrap_or_default();

    if let Some(ruid) = update_rev.metadata.uid.as_deref() {
        let rv = update_rev
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
        if let VersionSatisfaction::Unsatisfied { since } = ctx.rv_exp.satisfied(ruid, &rv, clock) {
            if since < EXPECTATION_TIMEOUT {
                return Ok(Action::requeue(EXPECTATION_TIMEOUT - since));
            }
            ctx.rv_exp.delete(ruid);
        }
    }
    for pod in &active {
        let (Some(puid), Some(rv)) = (
            pod.metadata.uid.as_deref(),
            pod.metadata.resource_version.as_deref(),
        ) else {
            continue;
        };
        ctx.rv_exp.observe(puid, rv);
        if let VersionSatisfaction::Unsatisfied { since } = ctx.rv_exp.satisfied(puid, rv, clock) {
            if since >= EXPECTATION_TIMEOUT {
                tracing::warn!(cloneset = %key, pod = podutil::name(pod), "pod version expectation timed out");
                ctx.rv_exp.delete(puid);
                continue;
            }
            tracing::debug!(cloneset = %key, pod = podutil::name(pod), "waiting for the cache to show our last pod write");
            return Ok(Action::requeue(
                (EXPECTATION_TIMEOUT - since).min(Duration::from_secs(5)),
            ));
        }
    }

    if cs.metadata.deletion_timestamp.is_none() {
        predownload_images(ctx, cs, &current, &update_rev).await;
    }

    let old_status = cs.status.clone().unwrap_or_default();
    let mut new_status = CloneSetStatus {
        observed_generation: cs.metadata.generation.unwrap_or_default(),
        current_revision: current_name.clone(),
        update_revision: update_name.clone(),
        collision_count: Some(collision),
        label_selector: status::selector_string(&cs.spec.selector),
        conditions: old_status.conditions.clone(),
        ..Default::default()
    };

    let pods: Vec<&Pod> = active.iter().map(|p| p.as_ref()).collect();
    let sync_result = if cs.metadata.deletion_timestamp.is_some() {
        Ok(())
    } else {
        let sync = Sync {
            ctx,
            cs,
            key: &key,
            settings: settings_of(cs),
            current: &current,
            update: &update_rev,
            revisions: &revisions,
            pvcs: &pvcs,
            now,
        };
        sync.run(&pods, &mut new_status, &mut requeue).await
    };

    status::calculate_counts(cs, &mut new_status, &pods, now);
    requeue.push(status::progressing(cs, &mut new_status, now));
    if status::status_changed(&old_status, &new_status) {
        tracing::info!(
            cloneset = %key,
            replicas = new_status.replicas,
            ready = new_status.ready_replicas,
            available = new_status.available_replicas,
            updated = new_status.updated_replicas,
            updated_ready = new_status.updated_ready_replicas,
            current_revision = %new_status.current_revision,
            update_revision = %new_status.update_revision,
            "updating CloneSet status"
        );
        write_status(ctx, cs, &new_status).await?;
    }

    if let Err(e) = truncate_pods_to_delete(ctx, cs, &pods).await {
        tracing::warn!(cloneset = %key, error = %e, "failed to truncate podsToDelete");
    }
    let live: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| podutil::revision_hash(p).map(str::to_string))
        .collect();
    let limit = cs
        .spec
        .revision_history_limit
        .unwrap_or(keys::DEFAULT_REVISION_HISTORY_LIMIT);
    for old in revision::revisions_to_truncate(
        &revisions,
        &live,
        &new_status.current_revision,
        &update_name,
        limit,
    ) {
        if let Err(e) = rev_api.delete(&old, &DeleteParams::default()).await {
            tracing::warn!(cloneset = %key, revision = %old, error = %e, "failed to delete old revision");
        }
    }

    if sync_result.is_ok() {
        // Look again the moment the next pod becomes available (minReadySeconds after it became
        // Ready), not minReadySeconds after this reconcile: scale-up under
        // scaleStrategy.maxUnavailable and updates under maxUnavailable wait for exactly that.
        for pod in &pods {
            requeue.push(podutil::available_in(pod, cs.spec.min_ready_seconds, now));
        }
    }
    sync_result?;
    Ok(requeue.action())
}

/// The pods this CloneSet owns after adopting matching orphans and releasing pods that no longer
/// match its selector.
async fn claim_pods(
    ctx: &Context,
    cs: &CloneSet,
    ns: &str,
    uid: &str,
) -> Result<Vec<Arc<Pod>>, Error> {
    let all = ctx.pods.in_namespace(ns);
    let refs: Vec<&Pod> = all.iter().map(|p| p.as_ref()).collect();
    let plan = claim::plan(
        uid,
        &cs.spec.selector,
        cs.metadata.deletion_timestamp.is_some(),
        &refs,
    );
    let mut owned: Vec<Arc<Pod>> = plan.owned.iter().map(|&i| all[i].clone()).collect();
    if plan.adopt.is_empty() && plan.release.is_empty() {
        return Ok(owned);
    }
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    for &i in &plan.release {
        let pod = refs[i];
        let patch = claim::release_patch(uid, pod.metadata.uid.as_deref().unwrap_or_default());
        match patch_pod(&api, pod, PodPart::Object, patch).await {
            Ok(_) => {
                tracing::info!(cloneset = %cs.name_any(), pod = podutil::name(pod), "released pod that no longer matches the selector")
            }
            Err(kube::Error::Api(s)) if s.is_not_found() || s.is_invalid() => {}
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(owner) = cs.controller_owner_ref(&()) {
        for &i in &plan.adopt {
            let pod = refs[i];
            let patch = claim::adopt_patch(&owner, pod.metadata.uid.as_deref().unwrap_or_default());
            match patch_pod(&api, pod, PodPart::Object, patch).await {
                Ok(p) => {
                    tracing::info!(cloneset = %cs.name_any(), pod = podutil::name(pod), "adopted orphan pod");
                    owned.push(Arc::new(p));
                }
                // Gone, or already taken by someone else (the UID guard failed): not ours.
                Err(kube::Error::Api(s))
                    if s.is_not_found() || s.is_invalid() || s.is_conflict() => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(owned)
}

/// The merge patch that turns `old` into `new`. Fields the serializer omits when zero must be
/// cleared explicitly, or the merge would keep their old value.
pub fn status_patch(old: Option<&CloneSetStatus>, new: &CloneSetStatus) -> Result<Value, Error> {
    let mut body = serde_json::to_value(new)?;
    if let (Some(old), Value::Object(obj)) = (old, &mut body)
        && let Value::Object(old) = serde_json::to_value(old)?
    {
        for k in old.keys() {
            obj.entry(k.clone()).or_insert(Value::Null);
        }
    }
    Ok(json!({ "status": body }))
}

async fn write_status(ctx: &Context, cs: &CloneSet, new: &CloneSetStatus) -> Result<(), Error> {
    let ns = cs.namespace().ok_or(Error::Unnamed)?;
    let api: Api<CloneSet> = Api::namespaced(ctx.client.clone(), &ns);
    let body = status_patch(cs.status.as_ref(), new)?;
    match api
        .patch_status(&cs.name_any(), &PatchParams::default(), &Patch::Merge(body))
        .await
    {
        Ok(_) => Ok(()),
        // Deleted since the cache saw it: there is no status left to write.
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn instance_id<K: Resource>(obj: &K) -> Option<&str> {
    obj.meta()
        .labels
        .as_ref()?
        .get(keys::CLONESET_INSTANCE_ID_LABEL)
        .map(String::as_str)
}

/// Without PVC reuse, PVCs whose pod is gone are deleted and those of finished pods are handed to
/// the pod; returns the PVCs still in use.
async fn cleanup_pvcs(
    ctx: &Context,
    cs: &CloneSet,
    ns: &str,
    active: &[Arc<Pod>],
    inactive: &[Arc<Pod>],
    pvcs: Vec<PersistentVolumeClaim>,
) -> Result<Vec<PersistentVolumeClaim>, Error> {
    let active_ids: BTreeSet<&str> = active
        .iter()
        .filter_map(|p| instance_id(p.as_ref()))
        .collect();
    let inactive_ids: Vec<Option<&str>> =
        inactive.iter().map(|p| instance_id(p.as_ref())).collect();
    let pvc_ids: Vec<Option<&str>> = pvcs.iter().map(instance_id).collect();
    let plan = scale::plan_pvc_cleanup(&pvc_ids, &active_ids, &inactive_ids);
    let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), ns);
    let cs_uid = cs.uid().unwrap_or_default();
    for &(i, p) in &plan.reown {
        let pvc = &pvcs[i];
        let pod = &inactive[p];
        let name = pvc.metadata.name.clone().unwrap_or_default();
        let mut refs: Vec<_> = pvc
            .metadata
            .owner_references
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|o| o.uid != cs_uid)
            .collect();
        refs.push(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: podutil::name(pod).to_string(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
        );
        let patch = json!({ "metadata": { "ownerReferences": refs } });
        let res = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await;
        if ctx
            .pvc_written(cs, pvc, res, "FailedUpdate", |e| {
                format!("failed to update PVC {name}: {e}")
            })
            .await?
        {
            tracing::info!(cloneset = %cs.name_any(), pvc = %name, pod = podutil::name(pod), "handed PVC to its finished pod");
        }
    }
    for &i in &plan.delete {
        let pvc = &pvcs[i];
        let name = pvc.metadata.name.clone().unwrap_or_default();
        let res = api.delete(&name, &DeleteParams::default()).await;
        if ctx
            .pvc_written(cs, pvc, res, "FailedDelete", |e| {
                format!("failed to clean up PVC {name}: {e}")
            })
            .await?
        {
            tracing::info!(cloneset = %cs.name_any(), pvc = %name, "deleted PVC whose pod is gone");
        }
    }
    Ok(plan.keep.into_iter().map(|i| pvcs[i].clone()).collect())
}

async fn owned_pvcs(
    ctx: &Context,
    cs: &CloneSet,
    ns: &str,
    uid: &str,
) -> Result<Vec<PersistentVolumeClaim>, Error> {
    if cs.spec.volume_claim_templates.is_empty() {
        return Ok(Vec::new());
    }
    let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), ns);
    let lp = ListParams::default().labels(&status::selector_string(&cs.spec.selector));
    let list = api.list(&lp).await?;
    Ok(list
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        })
        .collect())
}

async fn list_revisions(
    api: &Api<ControllerRevision>,
    cs: &CloneSet,
    uid: &str,
) -> Result<Vec<ControllerRevision>, Error> {
    let lp = ListParams::default().labels(&status::selector_string(&cs.spec.selector));
    Ok(api
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|r| {
            r.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        })
        .collect())
}

/// The current and update revisions, creating or bumping the update revision as needed.
async fn active_revisions(
    ctx: &Context,
    cs: &CloneSet,
    api: &Api<ControllerRevision>,
    revisions: &mut Vec<ControllerRevision>,
) -> Result<(ControllerRevision, ControllerRevision, i32), Error> {
    let ns = cs.namespace().ok_or(Error::Unnamed)?;
    let name = cs.name_any();
    let uid = cs.uid().ok_or(Error::Unnamed)?;
    let api_version = CloneSet::api_version(&());
    let kind = CloneSet::kind(&());
    let parent = Parent {
        api_version: &api_version,
        kind: &kind,
        name: &name,
        namespace: &ns,
        uid: &uid,
    };
    let mut collision = cs
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    let template = serde_json::to_value(&cs.spec.template)?;
    let tpl_labels = template_labels(cs);
    let annotations = cs.metadata.annotations.clone().unwrap_or_default();
    let candidate = revision::new_revision(
        &parent,
        &template,
        &tpl_labels,
        &annotations,
        revision::next_revision_number(revisions),
        collision,
    )?;
    let update = match revision::choose_update_revision(revisions, &candidate) {
        UpdateRevisionChoice::UseExisting(i) => revisions[i].clone(),
        UpdateRevisionChoice::Bump { index, new_number } => {
            let rname = revisions[index].metadata.name.clone().unwrap_or_default();
            tracing::info!(cloneset = %name, revision = %rname, new_number, "rolling back to an earlier revision");
            let bumped = api
                .patch(
                    &rname,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "revision": new_number })),
                )
                .await?;
            revisions[index] = bumped.clone();
            revision::sort_revisions(revisions);
            bumped
        }
        UpdateRevisionChoice::Create => {
            let created = create_revision(api, &name, candidate, &mut collision).await?;
            ctx.event_about(
                cs,
                &created,
                EventType::Normal,
                "RevisionCreated",
                format!(
                    "created revision {}",
                    created.metadata.name.clone().unwrap_or_default()
                ),
            )
            .await;
            revisions.push(created.clone());
            revision::sort_revisions(revisions);
            created
        }
    };
    let current_name = cs
        .status
        .as_ref()
        .map(|s| s.current_revision.clone())
        .unwrap_or_default();
    let current = revisions
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(current_name.as_str()))
        .cloned()
        .unwrap_or_else(|| update.clone());
    Ok((current, update, collision))
}

async fn create_revision(
    api: &Api<ControllerRevision>,
    parent: &str,
    candidate: ControllerRevision,
    collision: &mut i32,
) -> Result<ControllerRevision, Error> {
    loop {
        let mut obj = candidate.clone();
        let name = revision::name_for_collision(parent, &candidate, *collision)?;
        obj.metadata.name = Some(name.clone());
        match api.create(&PostParams::default(), &obj).await {
            Ok(c) => return Ok(c),
            Err(kube::Error::Api(s)) if s.is_already_exists() => {
                let existing = api.get(&name).await?;
                if existing.data.as_ref().map(|d| &d.0) == obj.data.as_ref().map(|d| &d.0) {
                    return Ok(existing);
                }
                // Same name, different template: a hash collision; try the next name.
                *collision += 1;
                tracing::info!(revision = %name, collision = *collision, "revision name collision");
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn template_of(rev: &ControllerRevision) -> Result<PodTemplateSpec, Error> {
    let v = revision::template_from_revision(rev)?;
    serde_json::from_value(v).map_err(|e| Error::Template(e.to_string()))
}

fn rfc3339(now: Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A new pod of `cs` at `revision_name` from `tpl`, named `{cs}-{id}`: revision and instance-id
/// labels, lifecycle PreparingNormal, the InPlaceUpdateReady readiness gate, and volumes for
/// the instance's PVCs.
pub fn new_pod(
    cs: &CloneSet,
    tpl: &PodTemplateSpec,
    revision_name: &str,
    id: &str,
    now: Timestamp,
) -> Pod {
    let name = cs.name_any();
    let meta = tpl.metadata.clone().unwrap_or_default();
    let mut pod = Pod::default();
    pod.metadata.name = Some(format!("{name}-{id}"));
    pod.metadata.namespace = cs.namespace();
    pod.metadata.labels = meta.labels;
    pod.metadata.annotations = meta.annotations;
    pod.metadata.finalizers = meta.finalizers;
    pod.metadata.owner_references = cs.controller_owner_ref(&()).map(|o| vec![o]);
    pod.spec = tpl.spec.clone();
    CloneSetHooks.write_revision(&mut pod, revision_name);
    let labels = pod.metadata.labels.get_or_insert_default();
    labels.insert(keys::CLONESET_INSTANCE_ID_LABEL.to_string(), id.to_string());
    labels.insert(
        keys::LIFECYCLE_STATE_LABEL.to_string(),
        LifecycleStateType::PreparingNormal.as_str().to_string(),
    );
    pod.metadata.annotations.get_or_insert_default().insert(
        keys::LIFECYCLE_TIMESTAMP_ANNOTATION.to_string(),
        rfc3339(now),
    );
    let spec = pod.spec.get_or_insert_default();
    let gates = spec.readiness_gates.get_or_insert_default();
    if !gates
        .iter()
        .any(|g| g.condition_type == keys::INPLACE_UPDATE_READY)
    {
        gates.push(PodReadinessGate {
            condition_type: keys::INPLACE_UPDATE_READY.to_string(),
        });
    }
    // Volumes from volumeClaimTemplates point at this instance's PVCs and replace template
    // volumes of the same name.
    let claims: Vec<(String, String)> = cs
        .spec
        .volume_claim_templates
        .iter()
        .map(|t| {
            let tname = t.metadata.name.clone().unwrap_or_default();
            (tname.clone(), format!("{tname}-{name}-{id}"))
        })
        .collect();
    if !claims.is_empty() {
        let mut volumes: Vec<Volume> = claims
            .iter()
            .map(|(vol, claim)| Volume {
                name: vol.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim.clone(),
                    read_only: Some(false),
                }),
                ..Default::default()
            })
            .collect();
        for v in spec.volumes.take().unwrap_or_default() {
            if !claims.iter().any(|(n, _)| *n == v.name) {
                volumes.push(v);
            }
        }
        spec.volumes = Some(volumes);
    }
    pod
}

/// The PVCs of instance `id`: `{template}-{cs}-{id}`, labelled like the pod, owned by `cs`.
pub fn new_pvcs(cs: &CloneSet, id: &str) -> Vec<PersistentVolumeClaim> {
    let name = cs.name_any();
    cs.spec
        .volume_claim_templates
        .iter()
        .map(|t| {
            let mut c = t.clone();
            let tname = t.metadata.name.clone().unwrap_or_default();
            c.metadata.name = Some(format!("{tname}-{name}-{id}"));
            c.metadata.namespace = cs.namespace();
            let labels = c.metadata.labels.get_or_insert_default();
            for (k, v) in cs.spec.selector.match_labels.iter().flatten() {
                labels.insert(k.clone(), v.clone());
            }
            labels.insert(keys::CLONESET_INSTANCE_ID_LABEL.to_string(), id.to_string());
            c.metadata.owner_references = cs.controller_owner_ref(&()).map(|o| vec![o]);
            c.status = None;
            c
        })
        .collect()
}

/// One sync pass: scale, or (when nothing scaled) update.
struct Sync<'a> {
    ctx: &'a Context,
    cs: &'a CloneSet,
    key: &'a str,
    settings: Settings,
    current: &'a ControllerRevision,
    update: &'a ControllerRevision,
    revisions: &'a [ControllerRevision],
    pvcs: &'a [PersistentVolumeClaim],
    now: Timestamp,
}

impl Sync<'_> {
    fn update_name(&self) -> String {
        self.update.metadata.name.clone().unwrap_or_default()
    }

    /// An Event on this CloneSet about one of its pods or PVCs.
    async fn event_about<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        self.ctx
            .event_about(self.cs, obj, type_, reason, note)
            .await;
    }

    /// The API of pods or PVCs in the CloneSet's namespace.
    fn api<K>(&self) -> Result<Api<K>, Error>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    {
        let ns = self.cs.namespace().ok_or(Error::Unnamed)?;
        Ok(Api::namespaced(self.ctx.client.clone(), &ns))
    }

    async fn run(
        &self,
        pods: &[&Pod],
        st: &mut CloneSetStatus,
        requeue: &mut Requeue,
    ) -> Result<(), Error> {
        if let Some(e) = self.settings.partition_error() {
            self.ctx
                .event(
                    self.cs,
                    EventType::Warning,
                    "InvalidPartition",
                    format!("partition is ignored: {e}"),
                    None,
                )
                .await;
        }
        let mut deferred = false;
        let (scaled, scale_err) = match self.scale(pods, requeue, &mut deferred).await {
            Ok(s) => (s, None),
            Err(e) => (false, Some(e)),
        };
        // A creation waiting out its backoff leaves the last FailedScale condition standing.
        if !deferred {
            report_failure(
                st,
                keys::CLONESET_CONDITION_FAILED_SCALE,
                scale_err.as_ref(),
                self.now,
            );
        }
        if scaled {
            return scale_err.map_or(Ok(()), Err);
        }
        let updated = self.update_pods(pods, requeue).await;
        report_failure(
            st,
            keys::CLONESET_CONDITION_FAILED_UPDATE,
            updated.as_ref().err(),
            self.now,
        );
        match (scale_err, updated) {
            (Some(e), _) | (None, Err(e)) => Err(e),
            (None, Ok(())) => Ok(()),
        }
    }

    // ----- scale -------------------------------------------------------------------------------

    /// One scale step; returns whether it wrote anything. `deferred` is set when pods are
    /// missing but their creation waits for the CloneSet's creation backoff (`requeue` gets the
    /// moment it ends).
    async fn scale(
        &self,
        pods: &[&Pod],
        requeue: &mut Requeue,
        deferred: &mut bool,
    ) -> Result<bool, Error> {
        let planned = scale::planned_deletes(&self.settings, pods);
        let cancel = scale::pre_deletes_to_cancel(
            &self.settings,
            self.cs.spec.lifecycle.as_ref(),
            pods,
            &planned,
        );
        if !cancel.is_empty() {
            let mut modified = false;
            for i in cancel {
                tracing::info!(cloneset = %self.key, pod = podutil::name(pods[i]), "cancelling deletion: PreparingDelete -> PreparingNormal");
                modified |= self
                    .set_lifecycle(pods[i], LifecycleStateType::PreparingNormal, None)
                    .await?;
            }
            if modified {
                return Ok(true);
            }
        }

        let update_name = self.update_name();
        let (mut diffs, _) = diff::calculate_diffs(
            &self.settings,
            pods,
            &|p| scale::counts_as_updated(p, &update_name),
            self.now,
        );
        if diffs.scale_up_num > 0
            && let Some(wait) = self.ctx.create_backoff.remaining(self.key, Instant::now())
        {
            tracing::debug!(cloneset = %self.key, wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX), "pod creation backs off after a failure");
            requeue.push(Some(wait));
            *deferred = true;
            return Ok(false);
        }
        if diffs.scale_up_num > diffs.scale_up_limit {
            self.ctx
                .event(
                    self.cs,
                    EventType::Warning,
                    "ScaleUpLimited",
                    format!(
                        "scaleUp is limited because of scaleStrategy.maxUnavailable, limit: {}",
                        diffs.scale_up_limit
                    ),
                    None,
                )
                .await;
        }

        if diffs.scale_up_num > 0 {
            return self
                .create_pods(pods, diffs.scale_up_limit, diffs.scale_up_num_old_revision)
                .await;
        }

        if !planned.pre_delete.is_empty() {
            let chosen: Vec<&Pod> = planned.pre_delete.iter().map(|&i| pods[i]).collect();
            if self.delete_pods(&chosen).await? {
                return Ok(true);
            }
        }

        let specified: Vec<usize> = planned
            .specified
            .iter()
            .copied()
            .filter(|i| !planned.pre_delete.contains(i))
            .collect();
        if !specified.is_empty() {
            let can = scale::limit_ready_deletes(
                pods,
                &specified,
                &mut diffs.delete_ready_limit,
                self.now,
            );
            let chosen: Vec<&Pod> = can.iter().map(|&i| pods[i]).collect();
            if self.delete_pods(&chosen).await? {
                return Ok(true);
            }
        }

        if diffs.scale_down_num > 0 {
            if planned.count > 0 {
                tracing::debug!(cloneset = %self.key, "scale-in waits for pods already being deleted");
                return Ok(false);
            }
            let (updated, not_updated): (Vec<usize>, Vec<usize>) =
                (0..pods.len()).partition(|&i| podutil::is_at_revision(pods[i], &update_name));
            let chosen = scale::choose_pods_to_delete(
                pods,
                diffs.scale_down_num,
                diffs.scale_down_num_old_revision,
                not_updated,
                updated,
                self.settings.min_ready_seconds,
                self.now,
            );
            let can =
                scale::limit_ready_deletes(pods, &chosen, &mut diffs.delete_ready_limit, self.now);
            let chosen: Vec<&Pod> = can.iter().map(|&i| pods[i]).collect();
            return self.delete_pods(&chosen).await;
        }
        Ok(false)
    }

    async fn create_pods(
        &self,
        pods: &[&Pod],
        total: i32,
        old_revision: i32,
    ) -> Result<bool, Error> {
        let total = usize::try_from(total.max(0)).unwrap_or(0);
        if total == 0 {
            return Ok(false);
        }
        let old_n = usize::try_from(old_revision.max(0)).unwrap_or(0).min(total);
        let pod_ids: BTreeSet<String> = pods
            .iter()
            .filter_map(|p| instance_id(*p).map(str::to_string))
            .collect();
        let pvc_ids: BTreeSet<String> = self
            .pvcs
            .iter()
            .filter_map(|p| instance_id(p).map(str::to_string))
            .collect();
        let existing_pvcs: BTreeSet<String> = self
            .pvcs
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        let ids = scale::available_ids(total, &pod_ids, &pvc_ids, &mut rand::rng());
        let current_tpl = template_of(self.current)?;
        let update_tpl = template_of(self.update)?;
        let current_name = self.current.metadata.name.clone().unwrap_or_default();
        let update_name = self.update_name();
        let new: Vec<(Pod, String)> = ids
            .iter()
            .enumerate()
            .map(|(k, id)| {
                let (tpl, rev) = if k < old_n {
                    (&current_tpl, &current_name)
                } else {
                    (&update_tpl, &update_name)
                };
                (new_pod(self.cs, tpl, rev, id, self.now), id.clone())
            })
            .collect();
        tracing::info!(cloneset = %self.key, count = total, current_revision = old_n, "creating pods");
        for (p, _) in &new {
            self.ctx
                .scale_exp
                .expect(self.key, ScaleAction::Create, podutil::name(p));
        }

        let mut created = 0usize;
        let mut first_err = None;
        let mut batch = INITIAL_CREATE_BATCH;
        let mut next = 0usize;
        // Slow start: a batch of 1, then 2, 4...; stop at the first failing batch so a quota or
        // webhook error costs one call, not hundreds.
        while next < new.len() {
            let end = (next + batch).min(new.len());
            let results = future::join_all(
                new[next..end]
                    .iter()
                    .map(|(p, id)| self.create_one(p, id, &existing_pvcs)),
            )
            .await;
            let mut failed = false;
            for (r, (p, _)) in results.into_iter().zip(&new[next..end]) {
                match r {
                    Ok(()) => created += 1,
                    Err(e) => {
                        self.ctx
                            .scale_exp
                            .observe(self.key, ScaleAction::Create, podutil::name(p));
                        failed = true;
                        first_err.get_or_insert(e);
                    }
                }
            }
            next = end;
            if failed {
                break;
            }
            batch *= 2;
        }
        // Pods never attempted will never be observed either.
        for (p, _) in &new[next..] {
            self.ctx
                .scale_exp
                .observe(self.key, ScaleAction::Create, podutil::name(p));
        }
        match first_err {
            Some(e) => {
                let wait = self.ctx.create_backoff.fail(self.key, Instant::now());
                tracing::warn!(cloneset = %self.key, error = %e, created, retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX), "pods could not be created");
                Err(e)
            }
            None => {
                self.ctx.create_backoff.reset(self.key);
                Ok(created > 0)
            }
        }
    }

    async fn create_one(
        &self,
        pod: &Pod,
        id: &str,
        existing_pvcs: &BTreeSet<String>,
    ) -> Result<(), Error> {
        let pvc_api = self.api::<PersistentVolumeClaim>()?;
        for pvc in new_pvcs(self.cs, id) {
            let pname = pvc.metadata.name.clone().unwrap_or_default();
            if existing_pvcs.contains(&pname) {
                continue;
            }
            match pvc_api.create(&PostParams::default(), &pvc).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_already_exists() => {}
                Err(e) => {
                    self.ctx
                        .event(
                            self.cs,
                            EventType::Warning,
                            "FailedCreate",
                            format!("failed to create pvc {pname}: {e}"),
                            None,
                        )
                        .await;
                    return Err(e.into());
                }
            }
        }
        let pname = podutil::name(pod).to_string();
        match self.api::<Pod>()?.create(&PostParams::default(), pod).await {
            Ok(_) => {
                self.event_about(
                    pod,
                    EventType::Normal,
                    "SuccessfulCreate",
                    format!("succeed to create pod {pname}"),
                )
                .await;
                Ok(())
            }
            Err(e) => {
                self.event_about(
                    pod,
                    EventType::Warning,
                    "FailedCreate",
                    format!("failed to create pod {pname}: {e}"),
                )
                .await;
                Err(e.into())
            }
        }
    }

    async fn delete_pods(&self, chosen: &[&Pod]) -> Result<bool, Error> {
        let mut modified = false;
        let api = self.api::<Pod>()?;
        let pre_delete = self
            .cs
            .spec
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_delete.as_ref());
        for pod in chosen {
            let pname = podutil::name(pod).to_string();
            if podutil::is_hooked(pre_delete, pod) {
                if self
                    .set_lifecycle(pod, LifecycleStateType::PreparingDelete, None)
                    .await?
                {
                    tracing::info!(cloneset = %self.key, pod = %pname, "pod held by preDelete hook: PreparingDelete");
                    modified = true;
                }
                continue;
            }
            self.ctx
                .scale_exp
                .expect(self.key, ScaleAction::Delete, &pname);
            match api.delete(&pname, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => {
                    // Already gone: its delete event has passed, so do not wait for it.
                    self.ctx
                        .scale_exp
                        .observe(self.key, ScaleAction::Delete, &pname);
                    continue;
                }
                Err(e) => {
                    self.ctx
                        .scale_exp
                        .observe(self.key, ScaleAction::Delete, &pname);
                    self.event_about(
                        *pod,
                        EventType::Warning,
                        "FailedDelete",
                        format!("failed to delete pod {pname}: {e}"),
                    )
                    .await;
                    return Err(e.into());
                }
            }
            modified = true;
            self.event_about(
                *pod,
                EventType::Normal,
                "SuccessfulDelete",
                format!("succeed to delete pod {pname}"),
            )
            .await;
            let id = instance_id(*pod);
            let pvc_api = self.api::<PersistentVolumeClaim>()?;
            for pvc in self.pvcs {
                if id.is_none() || instance_id(pvc) != id {
                    continue;
                }
                let n = pvc.metadata.name.clone().unwrap_or_default();
                let res = pvc_api.delete(&n, &DeleteParams::default()).await;
                self.ctx
                    .pvc_written(self.cs, pvc, res, "FailedDelete", |e| {
                        format!("failed to delete pvc {n}: {e}")
                    })
                    .await?;
            }
        }
        Ok(modified)
    }

    /// Patch the lifecycle label (and, with a hook, its labels and finalizers). Returns whether
    /// the pod was written.
    async fn set_lifecycle(
        &self,
        pod: &Pod,
        state: LifecycleStateType,
        handler: Option<&LifecycleHook>,
    ) -> Result<bool, Error> {
        self.mark_not_ready_for(pod, state).await?;
        if podutil::lifecycle_state(pod) == Some(state) && handler.is_none() {
            return Ok(false);
        }
        let mut labels = serde_json::Map::new();
        labels.insert(
            keys::LIFECYCLE_STATE_LABEL.to_string(),
            Value::String(state.as_str().to_string()),
        );
        let mut meta = serde_json::Map::new();
        if let Some(h) = handler {
            for (k, v) in &h.labels_handler {
                labels.insert(k.clone(), Value::String(v.clone()));
            }
            if !h.finalizers_handler.is_empty() {
                meta.insert("finalizers".into(), json!(h.finalizers_handler));
            }
        }
        meta.insert("labels".into(), Value::Object(labels));
        meta.insert(
            "annotations".into(),
            json!({ keys::LIFECYCLE_TIMESTAMP_ANNOTATION: rfc3339(self.now) }),
        );
        let patch = json!({ "metadata": meta });
        let written = patch_pod(&self.api()?, pod, PodPart::Object, patch).await?;
        self.ctx.expect_written(&written);
        tracing::info!(cloneset = %self.key, pod = podutil::name(pod), state = %state, "pod lifecycle changed");
        Ok(true)
    }

    /// The lifecycle hooks' markPodNotReady: hold KruisePodReady False while a pod waits in
    /// PreparingDelete or PreparingUpdate, and let it go once Updated.
    async fn mark_not_ready_for(&self, pod: &Pod, state: LifecycleStateType) -> Result<(), Error> {
        let lc = self.cs.spec.lifecycle.as_ref();
        let marks = |h: Option<&LifecycleHook>| h.is_some_and(|h| h.mark_pod_not_ready);
        let (key, add) = match state {
            LifecycleStateType::PreparingDelete
                if marks(lc.and_then(|l| l.pre_delete.as_ref())) =>
            {
                (keys::READINESS_KEY_PRE_DELETE_HOOK, true)
            }
            LifecycleStateType::PreparingUpdate
                if marks(lc.and_then(|l| l.in_place_update.as_ref())) =>
            {
                (keys::READINESS_KEY_PRE_UPDATE_HOOK, true)
            }
            LifecycleStateType::Updated if marks(lc.and_then(|l| l.in_place_update.as_ref())) => {
                (keys::READINESS_KEY_PRE_UPDATE_HOOK, false)
            }
            _ => return Ok(()),
        };
        let msg = kruise_api::appspub::PodReadinessMessage::new(
            keys::READINESS_USER_AGENT_LIFECYCLE,
            key,
        );
        let cond = crate::podreadiness::condition_with_key(pod, &msg, add, self.now).map_err(
            |source| Error::Readiness {
                pod: podutil::name(pod).to_string(),
                source,
            },
        )?;
        let Some(cond) = cond else { return Ok(()) };
        let patch = json!({ "status": { "conditions": [cond] } });
        let written = patch_pod(&self.api()?, pod, PodPart::Status, patch).await?;
        self.ctx.expect_written(&written);
        tracing::info!(cloneset = %self.key, pod = podutil::name(pod), key, held = add, "lifecycle hook readiness key changed");
        Ok(())
    }

    // ----- update ------------------------------------------------------------------------------

    async fn update_pods(&self, pods: &[&Pod], requeue: &mut Requeue) -> Result<(), Error> {
        let hooks = CloneSetHooks;
        let opts = update_options(self.cs);
        let update_name = self.update_name();
        let lifecycle = self.cs.spec.lifecycle.as_ref();

        // Pods are independent: their refreshes (completion checks, InPlaceUpdateReady back to
        // True) run side by side, so the last pod of a large batch does not wait for every
        // round trip of the ones before it.
        // Built eagerly (not inside a stream's closure) so the future stays Send.
        let refreshes: Vec<_> = pods
            .iter()
            .map(|pod| self.refresh_pod(pod, &hooks, &opts, &update_name, lifecycle))
            .collect();
        let refreshed: Vec<Result<(bool, Option<Duration>), Error>> =
            concurrently_in_order(refreshes).await;
        let mut modified = false;
        let mut first_err = None;
        for r in refreshed {
            match r {
                Ok((m, after)) => {
                    modified |= m;
                    requeue.push(after);
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        if modified {
            return Ok(());
        }

        let strategy = &self.cs.spec.update_strategy;
        if strategy.type_ == Some(CloneSetUpdateStrategyType::OnDelete) {
            return Ok(());
        }
        let rolling = strategy.rolling_update.as_ref();
        if rolling.is_some_and(|r| r.paused) {
            return Ok(());
        }
        let (diffs, _) = diff::calculate_diffs(
            &self.settings,
            pods,
            &|p| podutil::is_at_revision(p, &update_name),
            self.now,
        );
        if diffs.update_num <= 0 {
            return Ok(());
        }
        let (wait, skipped) = update::candidates(pods, &update_name);
        for (i, why) in skipped {
            tracing::debug!(cloneset = %self.key, pod = podutil::name(pods[i]), ?why, "not updating pod now");
        }
        let sorted = update::sort_candidates(
            pods,
            wait,
            rolling.and_then(|r| r.priority_strategy.as_ref()),
            rolling.map(|r| r.scatter_strategy.as_slice()),
        );
        let chosen = update::limit_candidates(
            pods,
            sorted,
            &diffs,
            &update_name,
            self.settings.min_ready_seconds,
            self.now,
        );
        // Every chosen pod is already within maxUnavailable/partition, so their updates are
        // sent together (bounded) rather than one pod's round trips after another's.
        let updates: Vec<_> = chosen
            .into_iter()
            .map(|i| self.update_pod_alone(pods[i], &opts))
            .collect();
        let results: Vec<(Result<(), Error>, Requeue)> = concurrently_in_order(updates).await;
        let mut first_err = None;
        for (res, r) in results {
            requeue.push(r.0);
            if let Err(e) = res {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// One pod's share of the refresh: completion check and InPlaceUpdateReady, then the
    /// lifecycle state. Returns whether the lifecycle changed and when to look again.
    async fn refresh_pod(
        &self,
        pod: &Pod,
        hooks: &CloneSetHooks,
        opts: &UpdateOptions,
        update_name: &str,
        lifecycle: Option<&Lifecycle>,
    ) -> Result<(bool, Option<Duration>), Error> {
        let out = self.ctx.inplace.refresh(hooks, pod, opts, self.now).await?;
        self.ctx.expect_version(
            pod.metadata.uid.as_deref(),
            out.new_resource_version.as_deref(),
        );
        let completed = hooks.pod_update_completed(pod).is_ok();
        let Some(next) = update::next_lifecycle_state(lifecycle, pod, update_name, completed)
        else {
            return Ok((false, out.requeue_after));
        };
        let was_updating = podutil::lifecycle_state(pod) == Some(LifecycleStateType::Updating);
        if !self.set_lifecycle(pod, next, None).await? {
            return Ok((false, out.requeue_after));
        }
        if was_updating {
            self.ctx.metrics.inplace_completed(METRIC_NAME);
            self.event_about(
                pod,
                EventType::Normal,
                "SuccessfulUpdatePodInPlaceCompleted",
                format!("pod {} finished its in-place update", podutil::name(pod)),
            )
            .await;
        }
        Ok((true, out.requeue_after))
    }

    /// [`Self::update_pod`] with its own requeue, so several can run at once.
    async fn update_pod_alone(
        &self,
        pod: &Pod,
        opts: &UpdateOptions,
    ) -> (Result<(), Error>, Requeue) {
        let mut r = Requeue::default();
        let res = self.update_pod(pod, opts, &mut r).await;
        (res, r)
    }

    async fn update_pod(
        &self,
        pod: &Pod,
        opts: &UpdateOptions,
        requeue: &mut Requeue,
    ) -> Result<(), Error> {
        let hooks = CloneSetHooks;
        let pname = podutil::name(pod).to_string();
        let update_name = self.update_name();
        let policy = pod_update_policy(self.cs);
        if matches!(
            policy,
            CloneSetPodUpdateStrategyType::InPlaceIfPossible
                | CloneSetPodUpdateStrategyType::InPlaceOnly
        ) {
            let old = self.revisions.iter().find(|r| {
                r.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| podutil::is_at_revision(pod, n))
            });
            let in_place_hook = self
                .cs
                .spec
                .lifecycle
                .as_ref()
                .and_then(|l| l.in_place_update.as_ref());
            let mut reason =
                InPlaceControl::can_update_in_place(&hooks, old, self.update, opts).err();
            if reason.is_none() {
                match podutil::lifecycle_state(pod) {
                    None
                    | Some(LifecycleStateType::PreparingNormal)
                    | Some(LifecycleStateType::Normal) => {
                        if podutil::is_hooked(in_place_hook, pod) {
                            self.set_lifecycle(pod, LifecycleStateType::PreparingUpdate, None)
                                .await?;
                            return Ok(());
                        }
                    }
                    Some(LifecycleStateType::Updated) => {
                        if let Some(h) = in_place_hook {
                            self.set_lifecycle(pod, LifecycleStateType::PreparingUpdate, Some(h))
                                .await?;
                        }
                        return Ok(());
                    }
                    Some(LifecycleStateType::PreparingUpdate) => {
                        if podutil::is_hooked(in_place_hook, pod) {
                            return Ok(());
                        }
                    }
                    Some(LifecycleStateType::Updating) => {}
                    Some(s @ LifecycleStateType::PreparingDelete) => {
                        return Err(Error::BadLifecycle {
                            pod: pname,
                            state: s.to_string(),
                        });
                    }
                }
                let mut opts = opts.clone();
                opts.lifecycle_state = Some(LifecycleStateType::Updating);
                match self
                    .ctx
                    .inplace
                    .update(&hooks, pod, old, self.update, &opts, self.now)
                    .await
                {
                    Ok(UpdateOutcome::Updated {
                        new_resource_version,
                        requeue_after,
                    }) => {
                        self.ctx.expect_version(
                            pod.metadata.uid.as_deref(),
                            new_resource_version.as_deref(),
                        );
                        requeue.push(requeue_after);
                        self.ctx.metrics.inplace_started(METRIC_NAME);
                        self.event_about(
                            pod,
                            EventType::Normal,
                            "SuccessfulUpdatePodInPlace",
                            format!(
                                "successfully update pod {pname} in-place(revision {update_name})"
                            ),
                        )
                        .await;
                        return Ok(());
                    }
                    Ok(UpdateOutcome::NotInPlace(r)) => reason = Some(r),
                    Err(e) => {
                        self.event_about(
                            pod,
                            EventType::Warning,
                            "FailedUpdatePodInPlace",
                            format!(
                                "failed to update pod {pname} in-place(revision {update_name}): {e}"
                            ),
                        )
                        .await;
                        return Err(e.into());
                    }
                }
            }
            let reason = reason.unwrap_or(NotInPlace::NoOldRevision);
            if policy == CloneSetPodUpdateStrategyType::InPlaceOnly {
                // Never recreate under InPlaceOnly: say why and leave the pod alone.
                self.event_about(
                    pod,
                    EventType::Warning,
                    "FailedUpdate",
                    format!(
                        "pod {pname} cannot be updated in place to {update_name} and the policy is InPlaceOnly: {reason}"
                    ),
                )
                .await;
                return Err(Error::InPlaceOnly { pod: pname, reason });
            }
            tracing::info!(cloneset = %self.key, pod = %pname, %reason, "cannot update in place, recreating");
        }

        let patch = json!({ "metadata": { "labels": { keys::SPECIFIED_DELETE_LABEL: "true" } } });
        match patch_pod(&self.api()?, pod, PodPart::Object, patch).await {
            Ok(written) => {
                self.ctx.expect_written(&written);
                self.event_about(
                    pod,
                    EventType::Normal,
                    "SuccessfulUpdatePodReCreate",
                    format!(
                        "successfully patch pod {pname} specified-delete for update(revision {update_name})"
                    ),
                )
                .await;
                Ok(())
            }
            Err(e) => {
                self.event_about(
                    pod,
                    EventType::Warning,
                    "FailedUpdatePodReCreate",
                    format!(
                        "failed to patch pod specified-delete {pname} for update(revision {update_name}): {e}"
                    ),
                )
                .await;
                Err(e.into())
            }
        }
    }
}

async fn truncate_pods_to_delete(ctx: &Context, cs: &CloneSet, pods: &[&Pod]) -> Result<(), Error> {
    let wanted = &cs.spec.scale_strategy.pods_to_delete;
    if wanted.is_empty() {
        return Ok(());
    }
    let live: Vec<String> = wanted
        .iter()
        .filter(|n| pods.iter().any(|p| podutil::name(p) == n.as_str()))
        .cloned()
        .collect();
    if live.len() == wanted.len() {
        return Ok(());
    }
    let ns = cs.namespace().ok_or(Error::Unnamed)?;
    let api: Api<CloneSet> = Api::namespaced(ctx.client.clone(), &ns);
    api.patch(
        &cs.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "scaleStrategy": { "podsToDelete": live } } })),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
    use kruise_api::apps::v1beta1::{CloneSetSpec, RollingUpdateCloneSetStrategy};

    /// Outputs come back in input order however the futures finish, and a slow first future
    /// does not hold back the start of the others (no head-of-line blocking).
    #[tokio::test]
    async fn concurrently_in_order_keeps_order_without_head_of_line_blocking() {
        let started = Arc::new(std::sync::Mutex::new(Vec::new()));
        let n = POD_WRITE_CONCURRENCY + 4;
        let futs: Vec<_> = (0..n)
            .map(|i| {
                let started = started.clone();
                async move {
                    started
                        .lock()
                        .expect("lock")
                        .push((i, tokio::time::Instant::now()));
                    // The first takes far longer than all the others together.
                    let ms = if i == 0 { 2_000 } else { 10 };
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    i
                }
            })
            .collect();
        let t0 = tokio::time::Instant::now();
        let out = concurrently_in_order(futs).await;
        assert_eq!(out, (0..n).collect::<Vec<_>>());
        let started = started.lock().expect("lock").clone();
        let last_start = started
            .iter()
            .map(|(_, t)| t.duration_since(t0))
            .max()
            .unwrap_or_default();
        assert!(
            last_start < Duration::from_secs(1),
            "every future started while the first was still running: {last_start:?}"
        );
    }

    fn cs() -> CloneSet {
        let labels: std::collections::BTreeMap<String, String> =
            [("app".to_string(), "demo".to_string())].into();
        let mut c = CloneSet::new(
            "demo",
            CloneSetSpec {
                replicas: Some(3),
                selector: LabelSelector {
                    match_labels: Some(labels.clone()),
                    ..Default::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(labels),
                        ..Default::default()
                    }),
                    spec: None,
                },
                ..Default::default()
            },
        );
        c.metadata.namespace = Some("ns".into());
        c
    }

    #[test]
    fn invalid_specs_are_reported() {
        assert_eq!(invalid_reason(&cs()), None);
        let mut c = cs();
        c.spec.selector = LabelSelector::default();
        assert!(invalid_reason(&c).is_some_and(|r| r.contains("empty")));
        let mut c = cs();
        c.spec.template.metadata = None;
        assert!(invalid_reason(&c).is_some_and(|r| r.contains("does not match")));
        let mut c = cs();
        c.spec.replicas = Some(-1);
        assert!(invalid_reason(&c).is_some());
    }

    #[test]
    fn options_follow_the_strategy() {
        let mut c = cs();
        c.spec.update_strategy.rolling_update = Some(RollingUpdateCloneSetStrategy {
            pod_update_policy: Some(CloneSetPodUpdateStrategyType::InPlaceOnly),
            in_place_update_strategy: Some(kruise_api::appspub::InPlaceUpdateStrategy {
                grace_period_seconds: 10,
                ..Default::default()
            }),
            ..Default::default()
        });
        let o = update_options(&c);
        assert_eq!(o.grace_period_seconds, 10);
        assert!(o.ignore_volume_claim_templates_hash_diff);
        assert_eq!(
            pod_update_policy(&cs()),
            CloneSetPodUpdateStrategyType::ReCreate
        );
    }

    #[test]
    fn settings_read_the_spec() {
        let mut c = cs();
        c.spec.scale_strategy.pods_to_delete = vec!["x".into()];
        c.metadata.labels = Some(
            [(
                keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_LABEL.to_string(),
                "true".to_string(),
            )]
            .into(),
        );
        let s = settings_of(&c);
        assert_eq!(s.replicas, 3);
        assert!(s.rolling.is_none());
        assert!(s.exclude_preparing_delete);
        assert_eq!(s.pods_to_delete, vec!["x".to_string()]);
    }

    #[test]
    fn status_patch_clears_omitted_fields() {
        let old = CloneSetStatus {
            updated_available_replicas: 3,
            expected_updated_replicas: 3,
            conditions: vec![status::new_condition(
                "FailedUpdate",
                true,
                "",
                "x",
                Timestamp::UNIX_EPOCH,
            )],
            ..Default::default()
        };
        let new = CloneSetStatus {
            replicas: 2,
            ..Default::default()
        };
        let p = status_patch(Some(&old), &new).expect("patch");
        assert_eq!(p["status"]["updatedAvailableReplicas"], Value::Null);
        assert_eq!(p["status"]["conditions"], Value::Null);
        assert_eq!(p["status"]["replicas"], 2);
        assert_eq!(p["status"]["readyReplicas"], 0);
        let p = status_patch(None, &new).expect("patch");
        assert!(p["status"].get("conditions").is_none());
    }

    #[test]
    fn new_pods_carry_identity_revision_gate_and_volumes() {
        use k8s_openapi::api::core::v1::{Container, PodSpec};
        let mut c = cs();
        c.metadata.uid = Some("cs-uid".into());
        let mut claim = PersistentVolumeClaim::default();
        claim.metadata.name = Some("data".into());
        c.spec.volume_claim_templates = vec![claim];
        let mut tpl = c.spec.template.clone();
        tpl.spec = Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some("img:v1".into()),
                ..Default::default()
            }],
            volumes: Some(vec![Volume {
                name: "data".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let p = new_pod(&c, &tpl, "demo-abc12", "x7k2q", Timestamp::UNIX_EPOCH);
        assert_eq!(p.metadata.name.as_deref(), Some("demo-x7k2q"));
        assert_eq!(p.metadata.namespace.as_deref(), Some("ns"));
        let l = p.metadata.labels.as_ref().expect("labels");
        assert_eq!(l[keys::CONTROLLER_REVISION_HASH_LABEL], "demo-abc12");
        assert_eq!(l[keys::POD_TEMPLATE_HASH_LABEL], "abc12");
        assert_eq!(l[keys::CLONESET_INSTANCE_ID_LABEL], "x7k2q");
        assert_eq!(l[keys::LIFECYCLE_STATE_LABEL], "PreparingNormal");
        assert_eq!(l["app"], "demo");
        let owner = &p.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("CloneSet", "cs-uid", Some(true))
        );
        let spec = p.spec.as_ref().expect("spec");
        let gates = spec.readiness_gates.as_ref().expect("gates");
        assert_eq!(gates.len(), 1);
        assert_eq!(gates[0].condition_type, keys::INPLACE_UPDATE_READY);
        let vols = spec.volumes.as_ref().expect("volumes");
        // The claim replaces the template volume of the same name.
        assert_eq!(vols.len(), 1);
        assert_eq!(
            vols[0]
                .persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.as_str()),
            Some("data-demo-x7k2q")
        );
        let pvcs = new_pvcs(&c, "x7k2q");
        assert_eq!(pvcs[0].metadata.name.as_deref(), Some("data-demo-x7k2q"));
        let pl = pvcs[0].metadata.labels.as_ref().expect("labels");
        assert_eq!(pl[keys::CLONESET_INSTANCE_ID_LABEL], "x7k2q");
        assert_eq!(pl["app"], "demo");
    }

    #[test]
    fn requeue_keeps_the_shortest() {
        let mut r = Requeue::default();
        r.push(None);
        r.push(Some(Duration::from_secs(10)));
        r.push(Some(Duration::from_secs(3)));
        r.push(Some(Duration::ZERO));
        assert_eq!(r.0, Some(Duration::from_secs(3)));
    }

    #[test]
    fn timestamps_are_rfc3339_seconds() {
        let t = Timestamp::from_second(1_700_000_000).expect("ts");
        assert_eq!(rfc3339(t), "2023-11-14T22:13:20Z");
    }
}
