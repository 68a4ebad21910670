//! Image pre-download for CloneSet, Advanced StatefulSet and Advanced DaemonSet: when a workload rolls out a
//! revision that can be applied in place, one ImagePullJob per changed container image pulls
//! the new image on the nodes of the workload's Pods that are not at the new revision yet, so
//! the in-place update does not wait for the pull. The update revision is then labelled
//! `apps.kruise.io/pre-predownload-created` (or `apps.kruise.io/image-predownload-ignored` when
//! pre-download does not apply) so this happens once per revision.
//!
//! Where to call it: in the workload's reconcile, after the current and update revisions are
//! known and before scaling/updating Pods (upstream does it right after computing revisions),
//! once per reconcile, with the workload read as a [`Workload`]:
//!
//! ```ignore
//! let can = inplace::can_update_in_place(&hooks, Some(&current), &update, &opts).is_ok();
//! if let Some(w) = predownload::Workload::cloneset(&cs) {
//!     predownload::ensure_predownload_jobs(&client, &w, &current, &update, can).await?;
//! }
//! ```
//!
//! Upstream only does this with the `PreDownloadImageForInPlaceUpdate` feature gate (default
//! off) and the daemon enabled; the caller checks [`enabled`] first. When both revisions are the
//! same it deletes the workload's pre-download jobs. Errors are for logging: upstream never
//! fails a reconcile over pre-download.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelectorRequirement, ObjectMeta};
use kruise_api::apps::v1beta1::{
    CompletionPolicy, CompletionPolicyType, ImagePullJob, ImagePullJobPodSelector,
    ImagePullJobSpec, ImagePullJobTemplate, PullPolicy, SandboxConfig,
};
use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

/// Whether the workload controllers pre-download images before in-place updates (upstream's
/// `isPreDownloadDisabled`, decided once when the controller is added).
pub fn enabled(gates: &FeatureGates) -> bool {
    gates.enabled(Gate::PreDownloadImageForInPlaceUpdate) && gates.enabled(Gate::KruiseDaemon)
}

/// Workloads with at most this many replicas update too fast for pre-download to help.
pub const MIN_REPLICAS_TO_PREDOWNLOAD: i32 = 3;
/// Pull attempts of a pre-download job on each node.
const BACKOFF_LIMIT: i32 = 1;
/// Pre-download jobs are deleted this long after they finish.
const JOB_TTL_SECONDS: i32 = 600;
/// An Advanced StatefulSet's or DaemonSet's pull timeout without its annotation (upstream
/// `CreateJobForWorkload`).
const STATEFULSET_JOB_TIMEOUT_SECONDS: i32 = 300;

#[derive(Debug, thiserror::Error)]
pub enum PreDownloadError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("revision {0} has no readable pod template: {1}")]
    Revision(String, String),
    #[error("invalid workload numbers: {0}")]
    Numbers(String),
}

/// What pre-download should do for a workload now.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Current and update revision are the same: remove the workload's pre-download jobs.
    DeleteJobs,
    /// Not enough updated ready pods yet (`imagePreDownloadMinUpdatedReadyPods`).
    Wait,
    /// The update revision was handled before (labelled created or ignored).
    Done,
    /// Pre-download does not apply; label the revision ignored. The reason is for the log.
    Ignore(&'static str),
    /// Create these jobs, then label the revision created.
    Create(Vec<ImagePullJob>),
}

/// What [`ensure_predownload_jobs`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Names of the jobs created now.
    pub created: Vec<String>,
    /// Names of the jobs deleted now.
    pub deleted: Vec<String>,
    /// Why nothing was created, when nothing was.
    pub skipped: Option<&'static str>,
}

fn template_of(rev: &ControllerRevision) -> Result<PodTemplateSpec, PreDownloadError> {
    let name = rev.name_any();
    let v = crate::revision::template_from_revision(rev)
        .map_err(|e| PreDownloadError::Revision(name.clone(), e.to_string()))?;
    serde_json::from_value(v).map_err(|e| PreDownloadError::Revision(name, e.to_string()))
}

/// Container name → new image, for containers whose image differs between the revisions (or
/// that are new).
pub fn changed_images(
    current: &ControllerRevision,
    update: &ControllerRevision,
) -> Result<BTreeMap<String, String>, PreDownloadError> {
    changed_images_since(&[current], update)
}

/// Container name → new image, for containers whose image differs from theirs in any of the
/// `old` revisions, or that none of them has (upstream Advanced DaemonSet's
/// `diffImagesBetweenRevisions`; with one old revision, CloneSet's comparison).
pub fn changed_images_since(
    old: &[&ControllerRevision],
    update: &ControllerRevision,
) -> Result<BTreeMap<String, String>, PreDownloadError> {
    let olds = old
        .iter()
        .map(|r| template_of(r))
        .collect::<Result<Vec<_>, _>>()?;
    let new = template_of(update)?;
    let images_of = |t: &PodTemplateSpec, name: &str| -> Option<Option<String>> {
        t.spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .find(|c| c.name == name)
            .map(|c| c.image.clone())
    };
    Ok(new
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter_map(|c| {
            let img = c.image.as_deref()?;
            let olds: Vec<Option<String>> =
                olds.iter().filter_map(|t| images_of(t, &c.name)).collect();
            let same = !olds.is_empty() && olds.iter().all(|o| o.as_deref() == Some(img));
            (!same).then(|| (c.name.clone(), img.to_string()))
        })
        .collect())
}

/// The revision's hash (its `controller.kubernetes.io/hash` label, upstream
/// `history.ControllerRevisionHashLabel`): the form a Pod labelled by the short hash carries.
fn revision_hash_label(rev: &ControllerRevision) -> String {
    rev.labels()
        .get(keys::k8s::CONTROLLER_REVISION_HASH_KEY)
        .cloned()
        .unwrap_or_default()
}

/// The pre-download jobs for the images that change between the two revisions.
pub fn jobs_for(
    w: &Workload,
    current: &ControllerRevision,
    update: &ControllerRevision,
) -> Result<Vec<ImagePullJob>, PreDownloadError> {
    Ok(pull_jobs(w, update, changed_images(current, update)?))
}

/// One ImagePullJob per image (container name → image), owned by the workload `w`, pulling on
/// the nodes of its Pods that are not at `update` yet (upstream `CreateJobForWorkload`, shared
/// by CloneSet, Advanced StatefulSet and Advanced DaemonSet).
pub fn pull_jobs(
    w: &Workload,
    update: &ControllerRevision,
    images: BTreeMap<String, String>,
) -> Vec<ImagePullJob> {
    let tpl = w.template;
    let pull_secrets: Vec<String> = tpl
        .spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.as_ref())
        .map(|v| v.iter().map(|s| s.name.clone()).collect())
        .unwrap_or_default();
    // Pods not at the update revision yet, whichever form (full name or hash) they carry.
    let mut selector = w.selector.clone();
    selector
        .match_expressions
        .get_or_insert_with(Vec::new)
        .push(LabelSelectorRequirement {
            key: keys::CONTROLLER_REVISION_HASH_LABEL.to_string(),
            operator: "NotIn".to_string(),
            values: Some(vec![update.name_any(), revision_hash_label(update)]),
        });
    // Everything a workload owns matches its selector; the template labels make the job do too.
    let mut labels = tpl
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(
        keys::k8s::CONTROLLER_REVISION_HASH_KEY.to_string(),
        revision_hash_label(update),
    );
    let annotations = tpl
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    images
        .into_iter()
        .map(|(container, image)| ImagePullJob {
            metadata: ObjectMeta {
                name: Some(format!("{}-{container}", update.name_any())),
                namespace: Some(w.namespace.clone()),
                labels: Some(labels.clone()),
                owner_references: Some(vec![w.owner.clone()]),
                ..Default::default()
            },
            spec: ImagePullJobSpec {
                image,
                template: ImagePullJobTemplate {
                    pull_secrets: pull_secrets.clone(),
                    pod_selector: Some(ImagePullJobPodSelector {
                        match_expressions: selector.match_expressions.clone().unwrap_or_default(),
                        match_labels: selector.match_labels.clone().unwrap_or_default(),
                    }),
                    parallelism: Some(w.parallelism.clone()),
                    pull_policy: Some(PullPolicy {
                        timeout_seconds: Some(w.timeout_seconds),
                        backoff_limit: Some(BACKOFF_LIMIT),
                    }),
                    completion_policy: CompletionPolicy {
                        type_: Some(CompletionPolicyType::Always),
                        ttl_seconds_after_finished: Some(JOB_TTL_SECONDS),
                        active_deadline_seconds: None,
                    },
                    sandbox_config: Some(SandboxConfig {
                        labels: labels.clone(),
                        annotations: annotations.clone(),
                    }),
                    ..Default::default()
                },
            },
            status: None,
        })
        .collect()
}

/// The pure decision. `can_update_in_place` is the engine's verdict for current → update.
pub fn decide(
    w: &Workload,
    current: &ControllerRevision,
    update: &ControllerRevision,
    can_update_in_place: bool,
) -> Result<Decision, PreDownloadError> {
    if current.name_any() == update.name_any() {
        return Ok(Decision::DeleteJobs);
    }
    let min_ready = w
        .min_updated_ready
        .clone()
        .map_err(PreDownloadError::Numbers)?;
    let updated_ready = if w.status_update_revision == update.name_any() {
        w.updated_ready_replicas
    } else {
        0
    };
    if min_ready > updated_ready {
        return Ok(Decision::Wait);
    }
    let labels = update.labels();
    if labels.contains_key(keys::IMAGE_PREDOWNLOAD_CREATED_LABEL)
        || labels.contains_key(keys::IMAGE_PREDOWNLOAD_IGNORED_LABEL)
    {
        return Ok(Decision::Done);
    }
    if let Some(why) = w.strategy_ignores {
        return Ok(Decision::Ignore(why));
    }
    if w.replicas <= MIN_REPLICAS_TO_PREDOWNLOAD {
        return Ok(Decision::Ignore("too few replicas"));
    }
    if w.one_batch.clone().map_err(PreDownloadError::Numbers)? {
        return Ok(Decision::Ignore("all pods update in one batch"));
    }
    if !can_update_in_place {
        return Ok(Decision::Ignore("the revision cannot be applied in place"));
    }
    Ok(Decision::Create(jobs_for(w, current, update)?))
}

async fn label_revision(
    client: &Client,
    rev: &ControllerRevision,
    key: &str,
) -> Result<(), PreDownloadError> {
    patch_revision_label(client, rev, key, json!("true")).await
}

/// Sets (a string) or removes (null) one label of a revision.
async fn patch_revision_label(
    client: &Client,
    rev: &ControllerRevision,
    key: &str,
    value: serde_json::Value,
) -> Result<(), PreDownloadError> {
    let api: Api<ControllerRevision> =
        Api::namespaced(client.clone(), &rev.namespace().unwrap_or_default());
    api.patch(
        &rev.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {key: value}}})),
    )
    .await?;
    Ok(())
}

/// Creates (or cleans up) the pre-download ImagePullJobs of the workload `w` for the move from
/// `current_revision` to `update_revision`. Idempotent: safe to call on every reconcile.
pub async fn ensure_predownload_jobs(
    client: &Client,
    w: &Workload<'_>,
    current_revision: &ControllerRevision,
    update_revision: &ControllerRevision,
    can_update_in_place: bool,
) -> Result<Outcome, PreDownloadError> {
    let decision = decide(w, current_revision, update_revision, can_update_in_place)?;
    apply(client, w, update_revision, decision).await
}

/// Carries out a [`Decision`] for the workload `w`: creates its jobs, deletes them, or labels
/// `update_revision` so it is handled once.
pub async fn apply(
    client: &Client,
    w: &Workload<'_>,
    update_revision: &ControllerRevision,
    decision: Decision,
) -> Result<Outcome, PreDownloadError> {
    let ns = w.namespace.as_str();
    let cs_name = w.owner.name.as_str();
    let jobs: Api<ImagePullJob> = Api::namespaced(client.clone(), ns);
    let mut out = Outcome::default();
    match decision {
        Decision::DeleteJobs => {
            // Jobs exist only for a revision labelled when they were created: a settled
            // workload costs no API call here, on every reconcile.
            if !update_revision
                .labels()
                .contains_key(keys::IMAGE_PREDOWNLOAD_CREATED_LABEL)
            {
                return Ok(out);
            }
            let uid = &w.owner.uid;
            for j in jobs.list(&ListParams::default()).await?.items {
                let ours = j
                    .owner_references()
                    .iter()
                    .any(|o| o.controller == Some(true) && &o.uid == uid);
                if !ours || j.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                match jobs.delete(&j.name_any(), &Default::default()).await {
                    Ok(_) => {
                        tracing::info!(workload = %cs_name, namespace = %ns, job = %j.name_any(), "deleted pre-download ImagePullJob");
                        out.deleted.push(j.name_any());
                    }
                    Err(kube::Error::Api(e)) if e.is_not_found() => {}
                    Err(e) => return Err(e.into()),
                }
            }
            patch_revision_label(
                client,
                update_revision,
                keys::IMAGE_PREDOWNLOAD_CREATED_LABEL,
                serde_json::Value::Null,
            )
            .await?;
        }
        Decision::Wait => out.skipped = Some("waiting for updated ready pods"),
        Decision::Done => out.skipped = Some("already handled"),
        Decision::Ignore(reason) => {
            tracing::debug!(workload = %cs_name, namespace = %ns, reason, "no image pre-download");
            label_revision(
                client,
                update_revision,
                keys::IMAGE_PREDOWNLOAD_IGNORED_LABEL,
            )
            .await?;
            out.skipped = Some(reason);
        }
        Decision::Create(to_create) => {
            for job in to_create {
                let name = job.name_any();
                match jobs.create(&PostParams::default(), &job).await {
                    Ok(_) => {
                        tracing::info!(workload = %cs_name, namespace = %ns, job = %name, image = %job.spec.image, "created pre-download ImagePullJob");
                        out.created.push(name);
                    }
                    Err(kube::Error::Api(e)) if e.is_already_exists() => {}
                    // Upstream carries on with the other images and still labels the revision.
                    Err(e) => {
                        tracing::warn!(workload = %cs_name, namespace = %ns, job = %name, error = %e, "failed to create pre-download ImagePullJob");
                    }
                }
            }
            label_revision(
                client,
                update_revision,
                keys::IMAGE_PREDOWNLOAD_CREATED_LABEL,
            )
            .await?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

mod workload;
pub use workload::Workload;
