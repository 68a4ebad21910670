//! The SidecarSet controller (upstream `pkg/controller/sidecarset/`): keeps each SidecarSet's
//! status and upgrades the sidecars of its Pods in place when only their images changed.
//!
//! [`plan`] decides (pure); this module reads the Pod cache and writes: for a Pod to upgrade,
//! first the `KruisePodReady` condition goes False under our key (the Pod leaves Service), then
//! one patch sets the new images, the Pod's hash entries and the in-place state; once the
//! kubelet runs the new images the key is removed again. Hot-upgrade sidecars ([`hot`]) never
//! leave Service: the idle container of the pair gets the new image, and once it runs and is
//! ready the working-container annotation flips to it and the old one goes to the empty image.

pub mod history;
pub mod hot;
pub mod plan;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Namespace, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1beta1::SidecarSet;
use kruise_api::appspub::{InPlaceUpdateState, PodReadinessMessage};
use kruise_api::{keys, sidecarset as wire};
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::expectations::{EXPECTATION_TIMEOUT, ResourceVersionExpectations, VersionSatisfaction};
use crate::metrics::Metrics;
use crate::podcache::PodCache;
use crate::runner::{Controller, ReconcileError, watch};

use plan::{Latest, PodState};

const NAME: &str = "sidecarset";
/// Name in Events.
const CONTROLLER_NAME: &str = "sidecarset-controller";
/// While Pods are upgrading, look again this often (the Pod events also wake us).
const PROGRESS_RESYNC: Duration = Duration::from_secs(5);
/// While the cache lags behind our own Pod writes, look again this soon (upstream: 1s).
const CACHE_RECHECK: Duration = Duration::from_secs(1);

/// What can go wrong reconciling a SidecarSet.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// A wire format could not be read or written.
    #[error("{0}")]
    Wire(#[from] kruise_api::Error),
    /// The ControllerRevision flow failed.
    #[error(transparent)]
    Revision(crate::revision::RevisionError),
    /// The status could not be serialized.
    #[error("serializing the status: {0}")]
    Serde(#[from] serde_json::Error),
    /// Some Pods could not be acted on; the others were, and the status says which.
    #[error("{count} matched Pod(s) could not be upgraded: {first}")]
    Blocked {
        /// How many.
        count: usize,
        /// The first one and why.
        first: String,
    },
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Wire(_) => "wire",
            Error::Blocked { .. } => "blocked",
            Error::Revision(_) => "revision",
            Error::Serde(_) => "serde",
        }
    }

    fn retry_floor(&self) -> Duration {
        match self {
            // Only a change of the Pod (which wakes us by itself) or of the API's mood fixes
            // it; retrying at the backoff's first milliseconds would only repeat the Events.
            Error::Blocked { .. } => PROGRESS_RESYNC,
            _ => Duration::ZERO,
        }
    }
}

struct Context {
    client: Client,
    pods: PodCache,
    /// Every Namespace, for `namespaceSelector` (the webhook reads the same labels).
    namespaces: Store<Namespace>,
    recorder: Recorder,
    /// The manager's namespace, where the SidecarSets' ControllerRevisions live.
    namespace: String,
    /// The versions of our own Pod writes the cache has not shown yet: maxUnavailable counts
    /// only upgraded Pods, so a plan over a Pod whose upgrade the cache does not show yet
    /// would upgrade one Pod too many (upstream `UpdateExpectations` /
    /// `ResourceVersionExpectations`).
    written: ResourceVersionExpectations,
}

impl Context {
    /// Remembers the version one of our Pod writes produced.
    fn wrote(&self, pod: &Pod) {
        if let (Some(uid), Some(rv)) = (
            pod.metadata.uid.as_deref(),
            pod.metadata.resource_version.as_deref(),
        ) {
            self.written.expect(uid, rv);
        }
    }

    /// How long to wait before planning when the cache still shows an older version of one
    /// of `pods` than we wrote; an expectation older than [`EXPECTATION_TIMEOUT`] is dropped
    /// (the write may have been overtaken by a delete and re-create).
    fn cache_lags(&self, pods: &[Arc<Pod>], now: std::time::Instant) -> Option<Duration> {
        if self.written.is_empty() {
            return None;
        }
        for pod in pods {
            let (Some(uid), Some(rv)) = (
                pod.metadata.uid.as_deref(),
                pod.metadata.resource_version.as_deref(),
            ) else {
                continue;
            };
            if let VersionSatisfaction::Unsatisfied { since } = self.written.satisfied(uid, rv, now)
            {
                if since >= EXPECTATION_TIMEOUT {
                    self.written.delete(uid);
                    continue;
                }
                return Some(CACHE_RECHECK);
            }
        }
        None
    }
}

impl Context {
    /// The labels of a namespace as the store has them (empty when unknown).
    fn namespace_labels(&self, namespace: &str) -> BTreeMap<String, String> {
        self.namespaces
            .get(&ObjectRef::new(namespace))
            .and_then(|n| n.metadata.labels.clone())
            .unwrap_or_default()
    }

    /// Publishes an Event on the SidecarSet; a refused Event is only logged.
    async fn event(&self, set: &SidecarSet, type_: EventType, reason: &str, note: String) {
        self.event_about(set, None, type_, reason, note).await;
    }

    /// An Event on the SidecarSet about `secondary` (the object it concerns).
    async fn event_about(
        &self,
        set: &SidecarSet,
        secondary: Option<ObjectReference>,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let ev = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: reason.to_owned(),
            secondary,
        };
        if let Err(e) = self.recorder.publish(&ev, &set.object_ref(&())).await {
            tracing::debug!(error = %e, reason, "event refused");
        }
    }
}

/// Runs until `shutdown`.
pub async fn run(
    client: Client,
    pods: PodCache,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let api: Api<SidecarSet> = Api::all(client.clone());
    let (namespaces, ns_writer) = reflector::store::<Namespace>();
    let ns_events = reflector::reflector(
        ns_writer,
        watcher(
            Api::<Namespace>::all(client.clone()),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .touched_objects();
    // A Pod event wakes every SidecarSet the Pod carries.
    let wake = pods.live_pods().flat_map(|p| {
        let names: Vec<ObjectRef<SidecarSet>> = p
            .annotations()
            .get(keys::SIDECARSET_HASH_ANNOTATION)
            .and_then(|v| wire::parse_hash_annotation(keys::SIDECARSET_HASH_ANNOTATION, v).ok())
            .map(|m| m.into_keys().map(|n| ObjectRef::new(&n)).collect())
            .unwrap_or_default();
        futures::stream::iter(names)
    });
    let reporter = Reporter {
        controller: CONTROLLER_NAME.to_owned(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let ctx = Arc::new(Context {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        pods,
        namespaces,
        namespace: crate::app::default_namespace(),
        written: ResourceVersionExpectations::new(),
    });
    let ctl = Controller::watching(NAME, watch(api), metrics, shutdown);
    // A namespace's labels changing can change which Pods a namespaceSelector matches.
    let store = ctl.store();
    let ns_wake = ns_events.flat_map(move |ev: Result<Namespace, watcher::Error>| {
        let refs: Vec<ObjectRef<SidecarSet>> = match ev {
            Ok(_) => store
                .state()
                .iter()
                .filter(|s| s.spec.namespace_selector.is_some())
                .map(|s| ObjectRef::from_obj(s.as_ref()))
                .collect(),
            Err(e) => {
                tracing::debug!(error = %e, "namespace watch error");
                Vec::new()
            }
        };
        futures::stream::iter(refs)
    });
    ctl.trigger_refs(wake)
        .trigger_refs(ns_wake)
        .run(reconcile, ctx)
        .await;
}

fn pod_key(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

#[tracing::instrument(skip_all, fields(sidecarset = %set.name_any()))]
async fn reconcile(set: Arc<SidecarSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.pods.wait_synced().await;
    // Until the namespaces are listed every namespaceSelector would match nothing.
    if ctx.namespaces.wait_until_ready().await.is_err() {
        return Ok(Action::requeue(PROGRESS_RESYNC));
    }
    let latest = Latest {
        hash: wire::current_hash(&set, keys::SIDECARSET_HASH_ANNOTATION)?,
        without_image: wire::current_hash(&set, keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION)?,
    };
    let all = ctx.pods.store().state();
    if !ctx.written.is_empty() {
        // Pods that are gone never show our write.
        let live: std::collections::HashSet<&str> = all
            .iter()
            .filter_map(|p| p.metadata.uid.as_deref())
            .collect();
        ctx.written.retain(|uid| live.contains(uid));
    }
    let mut pods: Vec<Arc<Pod>> = all
        .into_iter()
        .filter(|p| {
            let ns = p.namespace().unwrap_or_default();
            plan::is_matched(&set, p, &ctx.namespace_labels(&ns))
        })
        .collect();
    pods.sort_by_key(|p| (p.namespace(), p.name_any()));
    if let Some(after) = ctx.cache_lags(&pods, std::time::Instant::now()) {
        tracing::debug!("the Pod cache does not show our last writes yet");
        return Ok(Action::requeue(after));
    }
    let states: Vec<PodState> = pods
        .iter()
        .map(|p| plan::pod_state(&set, &latest, p))
        .collect();
    let refs: Vec<&Pod> = pods.iter().map(AsRef::as_ref).collect();
    let registered = history::register_latest(&ctx.client, &ctx.namespace, &set, &refs).await?;
    if registered.origin == crate::history::Origin::Created {
        // As the workloads do: the revision is what `injectionStrategy.revision` can pin.
        let about = ObjectReference {
            api_version: Some("apps/v1".to_owned()),
            kind: Some("ControllerRevision".to_owned()),
            namespace: Some(ctx.namespace.clone()),
            name: Some(registered.latest.clone()),
            ..Default::default()
        };
        ctx.event_about(
            &set,
            Some(about),
            EventType::Normal,
            keys::REASON_REVISION_CREATED,
            format!(
                "created revision {} in namespace {}",
                registered.latest, ctx.namespace
            ),
        )
        .await;
    }
    if !registered.deleted.is_empty() {
        tracing::info!(deleted = ?registered.deleted, "revisions beyond revisionHistoryLimit deleted");
    }
    let mut plan = plan::plan(&set, &states, &refs);
    plan.status.latest_revision = registered.latest;
    if registered.collision_count > 0 || plan.status.collision_count.is_some() {
        plan.status.collision_count = Some(registered.collision_count);
    }
    let now = Timestamp::now();

    // One Pod that cannot be written does not stop the others; each is reported.
    let mut blocked: Vec<String> = Vec::new();
    for &i in &plan.release {
        if let Err(e) = set_held(&ctx, &pods[i], false, now).await {
            blocked.push(format!("{}: {e}", pod_key(&pods[i])));
        }
    }
    for &i in &plan.upgrade {
        match upgrade(&ctx, &set, &latest, &pods[i], now).await {
            Ok(images) if !images.is_empty() => {
                let note = format!(
                    "upgrading the sidecars of Pod {} in place: {}",
                    pod_key(&pods[i]),
                    images.join(", ")
                );
                ctx.event(
                    &set,
                    EventType::Normal,
                    keys::SIDECARSET_REASON_UPGRADE,
                    note,
                )
                .await;
            }
            Ok(_) => {}
            Err(e) => blocked.push(format!("{}: {e}", pod_key(&pods[i]))),
        }
    }
    for pod in &pods {
        let flips: Vec<hot::Step> = hot::steps(&set, pod)
            .into_iter()
            .filter(|s| matches!(s, hot::Step::Flip { .. }))
            .collect();
        if flips.is_empty() {
            continue;
        }
        match flip(&ctx, pod, &flips).await {
            Ok(()) => {
                let note = format!(
                    "hot upgrade of Pod {}: the new version serves, the old container is emptied",
                    pod_key(pod)
                );
                ctx.event(
                    &set,
                    EventType::Normal,
                    keys::SIDECARSET_REASON_UPGRADE,
                    note,
                )
                .await;
            }
            Err(e) => blocked.push(format!("{}: {e}", pod_key(pod))),
        }
    }
    for b in &blocked {
        tracing::warn!(pod = %b, "cannot upgrade the sidecars of a matched Pod");
        ctx.event(
            &set,
            EventType::Warning,
            keys::SIDECARSET_REASON_UPGRADE_FAILED,
            format!("cannot upgrade the sidecars of Pod {b}"),
        )
        .await;
    }
    plan.status.conditions = plan::conditions(set.status.as_ref(), &blocked, now);
    if set.status.as_ref() != Some(&plan.status) {
        let api: Api<SidecarSet> = Api::all(ctx.client.clone());
        let patch = plan.status.merge_patch()?;
        api.patch_status(
            &set.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    }
    if let Some(first) = blocked.first() {
        // The runner backs this SidecarSet off; the others go on.
        return Err(Error::Blocked {
            count: blocked.len(),
            first: first.clone(),
        });
    }
    let busy = states.iter().any(|s| !s.consistent || s.held)
        || !plan.upgrade.is_empty()
        || plan.status.updated_pods < plan.status.matched_pods;
    Ok(if busy {
        Action::requeue(PROGRESS_RESYNC)
    } else {
        Action::await_change()
    })
}

/// Adds or removes our not-ready key on the Pod's `KruisePodReady` condition.
async fn set_held(ctx: &Context, pod: &Pod, hold: bool, now: Timestamp) -> Result<(), Error> {
    let msg = PodReadinessMessage::new(
        keys::READINESS_USER_AGENT_SIDECARSET,
        keys::READINESS_KEY_SIDECAR_UPGRADE,
    );
    let Some(cond) = kruise_api::appspub::kruise_pod_ready_condition(pod, &msg, hold, now)? else {
        return Ok(());
    };
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    let patch = json!({"status": {"conditions": [cond]}});
    match api
        .patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
    {
        Ok(written) => {
            ctx.wrote(&written);
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Upgrades the Pod's sidecars to the SidecarSet's images in place (upstream
/// `updateSidecarImageAndHash`).
async fn upgrade(
    ctx: &Context,
    set: &SidecarSet,
    latest: &Latest,
    pod: &Pod,
    now: Timestamp,
) -> Result<Vec<String>, Error> {
    let name = set.name_any();
    let ann = pod.annotations();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    let mut images = Vec::new();
    let mut last = serde_json::Map::new();
    for sc in &set.spec.containers {
        if sc.is_hot_upgrade() {
            continue;
        }
        let want = sc.container.image.clone().unwrap_or_default();
        let Some(have) = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.iter().find(|c| c.name == sc.container.name))
        else {
            continue;
        };
        if have.image.as_deref() == Some(want.as_str()) {
            continue;
        }
        images.push(json!({"name": sc.container.name, "image": want}));
        let image_id = statuses
            .iter()
            .find(|s| s.name == sc.container.name)
            .map(|s| s.image_id.clone())
            .unwrap_or_default();
        last.insert(sc.container.name.clone(), json!({"imageID": image_id}));
    }
    // Hot pairs: the new image goes to the idle container; the Pod stays in Service.
    let cold = !images.is_empty();
    let mut versions = BTreeMap::new();
    for step in hot::steps(set, pod) {
        let hot::Step::Start { container, image } = step else {
            continue;
        };
        images.push(json!({"name": container, "image": image}));
        let image_id = statuses
            .iter()
            .find(|s| s.name == container)
            .map(|s| s.image_id.clone())
            .unwrap_or_default();
        last.insert(container.clone(), json!({"imageID": image_id}));
        // The idle container's version is one above the working one's (upstream
        // `updateHotUpgradeContainerInPod`); `versionalt` points back at the working one.
        let version_of = |c: &str| {
            ann.get(&format!(
                "{}{c}",
                keys::SIDECARSET_VERSION_ANNOTATION_PREFIX
            ))
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0)
        };
        if let Some(other) = wire::hot_upgrade_other(&container) {
            let working = version_of(&other);
            versions.insert(
                format!("{}{container}", keys::SIDECARSET_VERSION_ANNOTATION_PREFIX),
                (working + 1).to_string(),
            );
            versions.insert(
                format!(
                    "{}{container}",
                    keys::SIDECARSET_VERSION_ALT_ANNOTATION_PREFIX
                ),
                working.to_string(),
            );
        }
    }
    let time = Time(now);
    let rewrite = |key: &'static str, hash: &str| -> Result<String, Error> {
        let mut m =
            wire::parse_hash_annotation(key, ann.get(key).map(String::as_str).unwrap_or(""))?;
        if let Some(e) = m.get_mut(&name) {
            e.hash = hash.to_owned();
            e.update_timestamp = time.clone();
        }
        Ok(wire::format_hash_annotation(&m)?)
    };
    let mut annotations = versions;
    annotations.insert(
        keys::SIDECARSET_HASH_ANNOTATION.to_owned(),
        rewrite(keys::SIDECARSET_HASH_ANNOTATION, &latest.hash)?,
    );
    annotations.insert(
        keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION.to_owned(),
        rewrite(
            keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION,
            &latest.without_image,
        )?,
    );
    if !images.is_empty() {
        let mut states = wire::parse_inplace_states(
            ann.get(keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION)
                .map(String::as_str)
                .unwrap_or(""),
        )?;
        let state: InPlaceUpdateState = serde_json::from_value(json!({
            "revision": latest.hash,
            "updateTimestamp": time,
            "lastContainerStatuses": last,
            "updateImages": true,
        }))
        .map_err(|source| kruise_api::Error::Serialize {
            what: "sidecar in-place state",
            source,
        })?;
        states.insert(name.clone(), state);
        annotations.insert(
            keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION.to_owned(),
            wire::format_inplace_states(&states)?,
        );
        if cold {
            // Out of Service before the sidecar restarts.
            set_held(ctx, pod, true, now).await?;
        }
    }
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    let mut patch = json!({"metadata": {"annotations": annotations}});
    if !images.is_empty() {
        patch["spec"] = json!({"containers": images});
    }
    tracing::info!(pod = %pod.name_any(), images = images.len(), "upgrading sidecars in place");
    let done: Vec<String> = images
        .iter()
        .map(|i| {
            format!(
                "{}={}",
                i["name"].as_str().unwrap_or_default(),
                i["image"].as_str().unwrap_or_default()
            )
        })
        .collect();
    match api
        .patch(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
    {
        Ok(written) => {
            ctx.wrote(&written);
            Ok(done)
        }
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// Makes the idle containers that now run the new image the working ones and puts the old
/// ones on the empty image, in one patch (upstream `flipPodSidecarContainerDo`).
async fn flip(ctx: &Context, pod: &Pod, flips: &[hot::Step]) -> Result<(), Error> {
    let mut working = hot::working_containers(pod);
    let mut images = Vec::new();
    for step in flips {
        if let hot::Step::Flip {
            sidecar,
            to,
            from,
            empty,
        } = step
        {
            working.insert(sidecar.clone(), to.clone());
            images.push(json!({"name": from, "image": empty}));
        }
    }
    let patch = json!({
        "metadata": {"annotations": {
            keys::SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION:
                wire::format_working_containers(&working)?,
        }},
        "spec": {"containers": images},
    });
    tracing::info!(pod = %pod.name_any(), "hot upgrade: switching the working sidecar containers");
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    match api
        .patch(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
    {
        Ok(written) => {
            ctx.wrote(&written);
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}
