//! The thin shell: the only part of the engine that talks to the API server. Each write is a
//! JSON patch computed from the pod as read, guarded by its resourceVersion; on a conflict the
//! pod is read again and `plan` decides again. Nothing here decides anything itself.

use super::completion::NotCompleted;
use super::conditions::with_inplace_condition;
use super::hooks::InPlaceHooks;
use super::patch::EngineError;
use super::plan::{self, GraceStep, PodWrite, RefreshStep};
use super::spec::{NotInPlace, UpdateOptions};
use crate::podcache::{PodRead, PodWritten};
use jiff::Timestamp;
use json_patch::jsonptr::PointerBuf;
use json_patch::{
    AddOperation, CopyOperation, MoveOperation, PatchOperation, RemoveOperation, ReplaceOperation,
    TestOperation,
};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::appspub::InPlaceUpdateState;
use kruise_api::keys;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde_json::Value;
use std::mem;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// How many times a write is retried after a conflict before giving up (client-go's default
/// backoff also tries five times).
const CONFLICT_ATTEMPTS: usize = 5;

#[derive(Debug, Error)]
pub enum ApplyError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("cannot serialize pod: {0}")]
    Serialize(#[from] serde_json::Error),
    #[error("pod {0} has no name or namespace")]
    Unnamed(String),
    #[error("still conflicting after {CONFLICT_ATTEMPTS} attempts")]
    TooManyConflicts,
}

/// Outcome of [`InPlaceControl::update`] (upstream `UpdateResult`).
#[derive(Debug)]
pub enum UpdateOutcome {
    /// Cannot update in place; the caller recreates the pod (or refuses, under InPlaceOnly).
    NotInPlace(NotInPlace),
    /// Updated in place. `requeue_after` is set when a grace period started.
    Updated {
        new_resource_version: Option<String>,
        requeue_after: Option<Duration>,
    },
}

/// Outcome of [`InPlaceControl::refresh`] (upstream `RefreshResult`).
#[derive(Debug, Default)]
pub struct RefreshOutcome {
    /// Come back after this long (a grace period is running).
    pub requeue_after: Option<Duration>,
    /// The pod was written; the caller should expect a new resourceVersion.
    pub new_resource_version: Option<String>,
    /// Why the update has not finished, when it has not.
    pub pending: Option<String>,
}

/// What the engine reports as it writes (the manager's metrics implement it): a trait, so the
/// engine depends on no metrics type.
pub trait InPlaceObserver: Send + Sync {
    /// A Pod's in-place update was written.
    fn update_started(&self, controller: &str);
    /// A Pod was marked InPlaceUpdateReady=True, `took` after its update was written.
    fn update_ready(&self, controller: &str, took: Duration);
}

/// The in-place engine bound to a client (upstream `inplaceupdate.Interface`).
#[derive(Clone)]
pub struct InPlaceControl {
    client: kube::Client,
    /// Who hears of updates started and finished, and the controller name it is told.
    observer: Option<(Arc<dyn InPlaceObserver>, &'static str)>,
}

/// How long ago the in-place update recorded on `pod` was written; `None` for a Pod with no
/// (readable) in-place state, such as a new Pod getting its first InPlaceUpdateReady.
fn update_age(pod: &Pod, now: Timestamp) -> Option<Duration> {
    let state = InPlaceUpdateState::from_annotations(pod.metadata.annotations.as_ref()).ok()??;
    Duration::try_from(now.duration_since(state.update_timestamp.0)).ok()
}

fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.is_conflict())
}

/// A JSON patch from `before` to `after`, guarded by `before`'s resourceVersion: the server
/// answers 409 if the pod changed since it was read.
///
/// Only what differs is turned into JSON. The parts are compared as Rust values first (no
/// allocation), and only a part that differs is serialized and diffed, under its own path. An
/// engine write changes metadata, some containers or the status' conditions, so it serializes
/// those and not the rest of the Pod (other containers, volumes, container statuses), where the
/// whole Pod serialized twice per write used to be most of a write's allocations. To compare
/// "the spec but its containers" and "the status but its conditions" without a copy, those
/// lists are taken out of both pods for the comparison and put back: both pods are as given
/// when this returns, hence `&mut`. The patch is the same as a diff of the whole Pods up to
/// the order of operations on disjoint paths (property-tested below).
pub fn guarded_patch(
    before: &mut Pod,
    after: &mut Pod,
) -> Result<Option<json_patch::Patch>, serde_json::Error> {
    let mut ops = Vec::new();
    diff_part(&before.metadata, &after.metadata, &["metadata"], &mut ops)?;
    match (before.spec.as_mut(), after.spec.as_mut()) {
        (Some(a), Some(b)) => {
            let (ca, cb) = (mem::take(&mut a.containers), mem::take(&mut b.containers));
            let rest = diff_part(&*a, &*b, &["spec"], &mut ops);
            (a.containers, b.containers) = (ca, cb);
            rest?;
            diff_list(
                &a.containers,
                &b.containers,
                &["spec", "containers"],
                &mut ops,
            )?;
        }
        (a, b) => diff_opt(a.as_deref(), b.as_deref(), &["spec"], &mut ops)?,
    }
    match (before.status.as_mut(), after.status.as_mut()) {
        (Some(a), Some(b)) => {
            let (ca, cb) = (a.conditions.take(), b.conditions.take());
            let rest = diff_part(&*a, &*b, &["status"], &mut ops);
            (a.conditions, b.conditions) = (ca, cb);
            rest?;
            match (a.conditions.as_deref(), b.conditions.as_deref()) {
                (Some(x), Some(y)) => diff_list(x, y, &["status", "conditions"], &mut ops)?,
                (x, y) => diff_opt(x, y, &["status", "conditions"], &mut ops)?,
            }
        }
        (a, b) => diff_opt(a.as_deref(), b.as_deref(), &["status"], &mut ops)?,
    }
    if ops.is_empty() {
        return Ok(None);
    }
    if let Some(rv) = before.metadata.resource_version.as_ref() {
        ops.insert(
            0,
            PatchOperation::Replace(ReplaceOperation {
                path: PointerBuf::from_tokens(["metadata", "resourceVersion"]),
                value: Value::String(rv.clone()),
            }),
        );
    }
    Ok(Some(json_patch::Patch(ops)))
}

/// The operations turning `a` into `b`, at `at`; nothing is serialized when they are equal.
fn diff_part<T: Serialize + PartialEq + ?Sized>(
    a: &T,
    b: &T,
    at: &[&str],
    ops: &mut Vec<PatchOperation>,
) -> Result<(), serde_json::Error> {
    if a == b {
        return Ok(());
    }
    let prefix = PointerBuf::from_tokens(at.iter().copied());
    let (va, vb) = (serde_json::to_value(a)?, serde_json::to_value(b)?);
    ops.extend(
        json_patch::diff(&va, &vb)
            .0
            .into_iter()
            .map(|op| under(&prefix, op)),
    );
    Ok(())
}

/// A list element by element when the lengths agree (only the changed elements are
/// serialized), else as a whole.
fn diff_list<T: Serialize + PartialEq>(
    a: &[T],
    b: &[T],
    at: &[&str],
    ops: &mut Vec<PatchOperation>,
) -> Result<(), serde_json::Error> {
    if a.len() != b.len() {
        return diff_part(a, b, at, ops);
    }
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        if x != y {
            let index = i.to_string();
            let mut path = at.to_vec();
            path.push(&index);
            diff_part(x, y, &path, ops)?;
        }
    }
    Ok(())
}

/// An optional field: added, removed or diffed. (A diff of `null` against an object would
/// replace a path that is absent on the server, which a JSON patch refuses.)
fn diff_opt<T: Serialize + PartialEq + ?Sized>(
    a: Option<&T>,
    b: Option<&T>,
    at: &[&str],
    ops: &mut Vec<PatchOperation>,
) -> Result<(), serde_json::Error> {
    let path = || PointerBuf::from_tokens(at.iter().copied());
    match (a, b) {
        (None, None) => {}
        (None, Some(b)) => ops.push(PatchOperation::Add(AddOperation {
            path: path(),
            value: serde_json::to_value(b)?,
        })),
        (Some(_), None) => ops.push(PatchOperation::Remove(RemoveOperation { path: path() })),
        (Some(a), Some(b)) => diff_part(a, b, at, ops)?,
    }
    Ok(())
}

/// `op` with its paths moved under `prefix`.
fn under(prefix: &PointerBuf, op: PatchOperation) -> PatchOperation {
    let at = |p: &PointerBuf| prefix.concat(p);
    match op {
        PatchOperation::Add(o) => PatchOperation::Add(AddOperation {
            path: at(&o.path),
            value: o.value,
        }),
        PatchOperation::Remove(o) => PatchOperation::Remove(RemoveOperation { path: at(&o.path) }),
        PatchOperation::Replace(o) => PatchOperation::Replace(ReplaceOperation {
            path: at(&o.path),
            value: o.value,
        }),
        PatchOperation::Move(o) => PatchOperation::Move(MoveOperation {
            from: at(&o.from),
            path: at(&o.path),
        }),
        PatchOperation::Copy(o) => PatchOperation::Copy(CopyOperation {
            from: at(&o.from),
            path: at(&o.path),
        }),
        PatchOperation::Test(o) => PatchOperation::Test(TestOperation {
            path: at(&o.path),
            value: o.value,
        }),
    }
}

/// The namespace and name of a pod, both required to address it.
fn pods_name(pod: &Pod) -> Result<(String, String), ApplyError> {
    match (&pod.metadata.namespace, &pod.metadata.name) {
        (Some(ns), Some(name)) => Ok((ns.clone(), name.clone())),
        (_, name) => Err(ApplyError::Unnamed(name.clone().unwrap_or_default())),
    }
}

/// The pods endpoint of `pod`'s namespace, its answers read as `K` (a [`PodRead`] or only the
/// [`PodWritten`] resourceVersion: the engine never reads managedFields).
fn pods<K>(client: &kube::Client, pod: &Pod) -> Result<(Api<K>, String), ApplyError>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    let (ns, name) = pods_name(pod)?;
    Ok((Api::namespaced(client.clone(), &ns), name))
}

impl InPlaceControl {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            observer: None,
        }
    }

    /// Reports every update written and every Pod marked ready to `observer`, as `controller`.
    pub fn observed_by(
        mut self,
        observer: Arc<dyn InPlaceObserver>,
        controller: &'static str,
    ) -> Self {
        self.observer = Some((observer, controller));
        self
    }

    /// Writes `write` (resize first, then the pod). `Ok(None)` when nothing changed. Takes the
    /// pod as read by value: the diff borrows it mutably, and the caller has no use for it after.
    async fn write(&self, mut before: Pod, write: PodWrite) -> Result<Option<String>, ApplyError> {
        let (api, name) = pods::<PodRead>(&self.client, &before)?;
        let PodWrite {
            pod: mut after,
            resize,
        } = write;
        if let Some(resize) = resize.as_ref() {
            // The resize subresource is the only way to change resources of a running pod; its
            // answer carries the new resourceVersion and resources, which the main write keeps.
            let PodRead(resized) = api
                .patch_subresource(
                    "resize",
                    &name,
                    &PatchParams::default(),
                    &Patch::Strategic(resize),
                )
                .await?;
            tracing::info!(pod = %name, "resized pod resources in place");
            before.metadata.resource_version = resized.metadata.resource_version.clone();
            after.metadata.resource_version = resized.metadata.resource_version.clone();
            if let (Some(b), Some(a), Some(r)) = (
                before.spec.as_mut(),
                after.spec.as_mut(),
                resized.spec.as_ref(),
            ) {
                for c in b.containers.iter_mut().chain(a.containers.iter_mut()) {
                    if let Some(rc) = r.containers.iter().find(|rc| rc.name == c.name) {
                        c.resources = rc.resources.clone();
                    }
                }
            }
        }
        match guarded_patch(&mut before, &mut after)? {
            None => Ok(before.metadata.resource_version),
            Some(patch) => {
                let (api, _) = pods::<PodWritten>(&self.client, &before)?;
                let written = api
                    .patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
                    .await?;
                Ok(written.into_resource_version())
            }
        }
    }

    /// Writes the status of `after`; returns the pod as written.
    async fn write_status(
        &self,
        before: &mut Pod,
        after: &mut Pod,
    ) -> Result<Option<Pod>, ApplyError> {
        let (api, name) = pods::<PodRead>(&self.client, before)?;
        match guarded_patch(before, after)? {
            None => Ok(None),
            Some(patch) => Ok(Some(
                api.patch_status(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
                    .await?
                    .0,
            )),
        }
    }

    async fn reread(&self, pod: &Pod) -> Result<Pod, ApplyError> {
        let (api, name) = pods::<PodRead>(&self.client, pod)?;
        Ok(api.get(&name).await?.0)
    }

    /// Runs `step` on a copy of the pod as given, then on freshly read copies after each
    /// conflict.
    async fn with_conflict_retry<T, F, Fut>(&self, pod: &Pod, mut step: F) -> Result<T, ApplyError>
    where
        F: FnMut(Pod) -> Fut,
        Fut: std::future::Future<Output = Result<T, ApplyError>>,
    {
        let mut current = pod.clone();
        for attempt in 0..CONFLICT_ATTEMPTS {
            match step(current).await {
                Err(ApplyError::Kube(e)) if is_conflict(&e) => {
                    tracing::debug!(
                        pod = pod.metadata.name.as_deref().unwrap_or(""),
                        attempt,
                        "conflict, reading the pod again"
                    );
                    current = self.reread(pod).await?;
                }
                other => return other,
            }
        }
        Err(ApplyError::TooManyConflicts)
    }

    /// Updates `pod` in place from `old` to `new` (upstream `Update`): InPlaceUpdateReady=False
    /// when the pod must leave service, then the revision, state and first batch (or the grace
    /// annotation). `now` is the caller's clock.
    pub async fn update(
        &self,
        hooks: &dyn InPlaceHooks,
        pod: &Pod,
        old: Option<&ControllerRevision>,
        new: &ControllerRevision,
        opts: &UpdateOptions,
        now: Timestamp,
    ) -> Result<UpdateOutcome, ApplyError> {
        let spec = match hooks.calculate_spec(old, new, opts) {
            Ok(spec) => spec,
            Err(reason) => return Ok(UpdateOutcome::NotInPlace(reason)),
        };
        let mut current = None;
        if hooks.pod_needs_be_unready(pod, &spec, opts) {
            current = Some(
                self.with_conflict_retry(pod, |mut p| async move {
                    let reason = Some(keys::REASON_START_INPLACE_UPDATE);
                    match with_inplace_condition(&p, false, reason, now) {
                        Some(mut after) => {
                            Ok(self.write_status(&mut p, &mut after).await?.unwrap_or(p))
                        }
                        None => Ok(p),
                    }
                })
                .await?,
            );
        }
        let spec = &spec;
        let new_rv = self
            .with_conflict_retry(current.as_ref().unwrap_or(pod), |p| async move {
                let write = plan::plan_update(&p, spec, hooks, opts, now)?;
                self.write(p, write).await
            })
            .await?;
        tracing::info!(
            pod = pod.metadata.name.as_deref().unwrap_or(""),
            revision = %spec.revision,
            grace_seconds = spec.grace_seconds,
            "updated pod in place"
        );
        if let Some((o, controller)) = &self.observer {
            o.update_started(controller);
        }
        Ok(UpdateOutcome::Updated {
            new_resource_version: new_rv,
            requeue_after: (spec.grace_seconds > 0)
                .then(|| Duration::from_secs(u64::try_from(spec.grace_seconds).unwrap_or(0))),
        })
    }

    /// Moves an in-place update forward (upstream `Refresh`): ends grace periods, patches the
    /// next launch-priority batch, and sets InPlaceUpdateReady=True when everything is done.
    /// Reads nothing unless it has to write: the decision is made on `pod` as given, and the
    /// pod is copied only for a write (every pod is refreshed at every reconcile, and most
    /// need nothing).
    pub async fn refresh(
        &self,
        hooks: &dyn InPlaceHooks,
        pod: &Pod,
        opts: &UpdateOptions,
        now: Timestamp,
    ) -> Result<RefreshOutcome, ApplyError> {
        let mut step = plan::plan_refresh(pod, hooks, opts, now)?;
        // The pod as read again after a conflict; `pod` until then.
        let mut reread: Option<Pod> = None;
        for attempt in 0..CONFLICT_ATTEMPTS {
            if let Some(outcome) = unwritten(&step) {
                return Ok(outcome);
            }
            let before = |reread: &mut Option<Pod>| reread.take().unwrap_or_else(|| pod.clone());
            let written = match step {
                RefreshStep::Grace(GraceStep::Drop(w) | GraceStep::Apply(w))
                | RefreshStep::NextBatch(w) => self.write(before(&mut reread), w).await,
                RefreshStep::MarkReady(mut after) => {
                    let mut read = before(&mut reread);
                    let age = update_age(&read, now);
                    let written = self.write_status(&mut read, &mut after).await;
                    if let (Ok(Some(_)), Some(took), Some((o, controller))) =
                        (&written, age, &self.observer)
                    {
                        o.update_ready(controller, took);
                    }
                    written.map(|w| w.and_then(|w| w.metadata.resource_version))
                }
                // Answered by `unwritten` above.
                RefreshStep::Grace(GraceStep::Wait(_) | GraceStep::NotInGrace)
                | RefreshStep::Idle
                | RefreshStep::InProgress(_)
                | RefreshStep::WaitingForBatch(_) => Ok(None),
            };
            match written {
                Ok(rv) => {
                    return Ok(RefreshOutcome {
                        new_resource_version: rv,
                        ..Default::default()
                    });
                }
                Err(ApplyError::Kube(e)) if is_conflict(&e) => {
                    tracing::debug!(
                        pod = pod.metadata.name.as_deref().unwrap_or(""),
                        attempt,
                        "conflict, reading the pod again"
                    );
                    let fresh = self.reread(pod).await?;
                    step = plan::plan_refresh(&fresh, hooks, opts, now)?;
                    reread = Some(fresh);
                }
                Err(e) => return Err(e),
            }
        }
        Err(ApplyError::TooManyConflicts)
    }

    /// What [`Self::refresh`] answers for `pod` when it has nothing to write, decided without a
    /// future or a client; `None` when it would write (or fail, which it then reports). Every
    /// Pod of a workload is refreshed at every reconcile and most need nothing: the caller
    /// makes the refresh's future only for the others.
    pub fn refresh_unwritten(
        hooks: &dyn InPlaceHooks,
        pod: &Pod,
        opts: &UpdateOptions,
        now: Timestamp,
    ) -> Option<RefreshOutcome> {
        unwritten(&plan::plan_refresh(pod, hooks, opts, now).ok()?)
    }
}

/// The outcome of a refresh step that writes nothing; `None` for a step that writes.
fn unwritten(step: &RefreshStep) -> Option<RefreshOutcome> {
    let mut outcome = RefreshOutcome::default();
    match step {
        RefreshStep::Grace(GraceStep::Wait(d)) => {
            outcome.requeue_after = Some(*d);
            outcome.pending = Some(NotCompleted::GracePending.to_string());
        }
        RefreshStep::Grace(GraceStep::NotInGrace) | RefreshStep::Idle => {}
        RefreshStep::InProgress(why) => outcome.pending = Some(why.to_string()),
        RefreshStep::WaitingForBatch(why) => outcome.pending = Some(why.to_string()),
        RefreshStep::Grace(GraceStep::Drop(_) | GraceStep::Apply(_))
        | RefreshStep::NextBatch(_)
        | RefreshStep::MarkReady(_) => return None,
    }
    Some(outcome)
}

#[cfg(test)]
mod tests;
