//! The thin shell: the only part of the engine that talks to the API server. Each write is a
//! JSON patch computed from the pod as read, guarded by its resourceVersion; on a conflict the
//! pod is read again and `plan` decides again. Nothing here decides anything itself.

use super::completion::NotCompleted;
use super::conditions::with_inplace_condition;
use super::hooks::InPlaceHooks;
use super::patch::EngineError;
use super::plan::{self, GraceStep, PodWrite, RefreshStep};
use super::spec::{NotInPlace, UpdateOptions};
use jiff::Timestamp;
use json_patch::jsonptr::PointerBuf;
use json_patch::{PatchOperation, ReplaceOperation};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;
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

/// The in-place engine bound to a client (upstream `inplaceupdate.Interface`).
#[derive(Clone)]
pub struct InPlaceControl {
    client: kube::Client,
}

fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.is_conflict())
}

/// A JSON patch from `before` to `after`, guarded by `before`'s resourceVersion: the server
/// answers 409 if the pod changed since it was read.
fn guarded_patch(
    before: &Pod,
    after: &Pod,
) -> Result<Option<json_patch::Patch>, serde_json::Error> {
    let (a, b) = (serde_json::to_value(before)?, serde_json::to_value(after)?);
    let mut ops = json_patch::diff(&a, &b).0;
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

/// The namespace and name of a pod, both required to address it.
fn pods_name(pod: &Pod) -> Result<(String, String), ApplyError> {
    match (&pod.metadata.namespace, &pod.metadata.name) {
        (Some(ns), Some(name)) => Ok((ns.clone(), name.clone())),
        (_, name) => Err(ApplyError::Unnamed(name.clone().unwrap_or_default())),
    }
}

fn pods(client: &kube::Client, pod: &Pod) -> Result<(Api<Pod>, String), ApplyError> {
    let (ns, name) = pods_name(pod)?;
    Ok((Api::namespaced(client.clone(), &ns), name))
}

impl InPlaceControl {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    /// Writes `write` (resize first, then the pod). `Ok(None)` when nothing changed.
    async fn write(&self, before: &Pod, write: &PodWrite) -> Result<Option<String>, ApplyError> {
        let (api, name) = pods(&self.client, before)?;
        let mut before = before.clone();
        let mut after = write.pod.clone();
        if let Some(resize) = write.resize.as_ref() {
            // The resize subresource is the only way to change resources of a running pod; its
            // answer carries the new resourceVersion and resources, which the main write keeps.
            let resized = api
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
        match guarded_patch(&before, &after)? {
            None => Ok(before.metadata.resource_version.clone()),
            Some(patch) => {
                let written = api
                    .patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
                    .await?;
                Ok(written.metadata.resource_version)
            }
        }
    }

    /// Writes the status of `after`; returns the pod as written.
    async fn write_status(&self, before: &Pod, after: &Pod) -> Result<Option<Pod>, ApplyError> {
        let (api, name) = pods(&self.client, before)?;
        match guarded_patch(before, after)? {
            None => Ok(None),
            Some(patch) => Ok(Some(
                api.patch_status(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
                    .await?,
            )),
        }
    }

    async fn reread(&self, pod: &Pod) -> Result<Pod, ApplyError> {
        let (api, name) = pods(&self.client, pod)?;
        Ok(api.get(&name).await?)
    }

    /// Runs `step` on the pod as given, then on freshly read copies after each conflict.
    async fn with_conflict_retry<T, F, Fut>(&self, pod: &Pod, mut step: F) -> Result<T, ApplyError>
    where
        F: FnMut(Pod) -> Fut,
        Fut: std::future::Future<Output = Result<T, ApplyError>>,
    {
        let mut current = pod.clone();
        for attempt in 0..CONFLICT_ATTEMPTS {
            match step(current.clone()).await {
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
        let mut current = pod.clone();
        if hooks.pod_needs_be_unready(pod, &spec, opts) {
            current = self
                .with_conflict_retry(pod, |p| async move {
                    let reason = Some(keys::REASON_START_INPLACE_UPDATE);
                    match with_inplace_condition(&p, false, reason, now) {
                        Some(after) => Ok(self.write_status(&p, &after).await?.unwrap_or(p)),
                        None => Ok(p),
                    }
                })
                .await?;
        }
        let spec = &spec;
        let new_rv = self
            .with_conflict_retry(&current, |p| async move {
                let write = plan::plan_update(&p, spec, hooks, opts, now)?;
                self.write(&p, &write).await
            })
            .await?;
        tracing::info!(
            pod = pod.metadata.name.as_deref().unwrap_or(""),
            revision = %spec.revision,
            grace_seconds = spec.grace_seconds,
            "updated pod in place"
        );
        Ok(UpdateOutcome::Updated {
            new_resource_version: new_rv,
            requeue_after: (spec.grace_seconds > 0)
                .then(|| Duration::from_secs(u64::try_from(spec.grace_seconds).unwrap_or(0))),
        })
    }

    /// Moves an in-place update forward (upstream `Refresh`): ends grace periods, patches the
    /// next launch-priority batch, and sets InPlaceUpdateReady=True when everything is done.
    /// Reads nothing unless it has to write: the decision is made on `pod` as given.
    pub async fn refresh(
        &self,
        hooks: &dyn InPlaceHooks,
        pod: &Pod,
        opts: &UpdateOptions,
        now: Timestamp,
    ) -> Result<RefreshOutcome, ApplyError> {
        self.with_conflict_retry(pod, |p| async move {
            let mut outcome = RefreshOutcome::default();
            match plan::plan_refresh(&p, hooks, opts, now)? {
                RefreshStep::Grace(GraceStep::Wait(d)) => {
                    outcome.requeue_after = Some(d);
                    outcome.pending = Some(NotCompleted::GracePending.to_string());
                }
                RefreshStep::Grace(GraceStep::Drop(w) | GraceStep::Apply(w))
                | RefreshStep::NextBatch(w) => {
                    outcome.new_resource_version = self.write(&p, &w).await?;
                }
                RefreshStep::Grace(GraceStep::NotInGrace) | RefreshStep::Idle => {}
                RefreshStep::InProgress(why) => outcome.pending = Some(why.to_string()),
                RefreshStep::WaitingForBatch(why) => outcome.pending = Some(why.to_string()),
                RefreshStep::MarkReady(after) => {
                    outcome.new_resource_version = self
                        .write_status(&p, &after)
                        .await?
                        .and_then(|w| w.metadata.resource_version);
                }
            }
            Ok(outcome)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn pod(rv: Option<&str>, labels: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                resource_version: rv.map(str::to_string),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn guarded_patch_leads_with_the_resource_version() {
        let before = pod(Some("7"), &[("a", "1")]);
        let after = pod(Some("7"), &[("a", "2"), ("b/c", "3")]);
        let patch = guarded_patch(&before, &after)
            .expect("serializes")
            .expect("changed");
        assert_eq!(
            serde_json::to_value(&patch).expect("json"),
            json!([
                {"op": "replace", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "replace", "path": "/metadata/labels/a", "value": "2"},
                {"op": "add", "path": "/metadata/labels/b~1c", "value": "3"},
            ])
        );
        // Applying it to the pod as read gives the pod we wanted.
        let mut doc = serde_json::to_value(&before).expect("json");
        json_patch::patch(&mut doc, &patch).expect("applies");
        assert_eq!(doc, serde_json::to_value(&after).expect("json"));
    }

    #[test]
    fn guarded_patch_is_empty_when_nothing_changed() {
        let p = pod(Some("7"), &[("a", "1")]);
        assert!(guarded_patch(&p, &p).expect("serializes").is_none());
        let unversioned = pod(None, &[("a", "1")]);
        let changed = pod(None, &[("a", "2")]);
        let patch = guarded_patch(&unversioned, &changed)
            .expect("serializes")
            .expect("changed");
        assert_eq!(patch.0.len(), 1);
    }

    #[test]
    fn unnamed_pods_are_refused() {
        let client_free = Pod::default();
        assert!(matches!(
            pods_name(&client_free),
            Err(ApplyError::Unnamed(_))
        ));
    }
}
