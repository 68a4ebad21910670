//! CloneSet image pre-download: when a CloneSet rolls out a revision that can be applied in
//! place, one ImagePullJob per changed container image pulls the new image on the nodes of the
//! CloneSet's pods that are not at the new revision yet, so the in-place update does not wait for
//! the pull. The update revision is then labelled `apps.kruise.io/pre-predownload-created` (or
//! `apps.kruise.io/image-predownload-ignored` when pre-download does not apply) so this happens
//! once per revision.
//!
//! Where to call it: in the CloneSet reconcile, after the current and update revisions are known
//! and before scaling/updating pods (upstream does it right after computing revisions and the new
//! status skeleton), once per reconcile:
//!
//! ```ignore
//! let can = inplace::can_update_in_place(&hooks, Some(&current), &update, &opts).is_ok();
//! if let Err(e) = predownload::ensure_predownload_jobs(&client, &cs, &current, &update, can).await {
//!     tracing::warn!(error = %e, "failed to pre-download images");   // never fails the reconcile
//! }
//! ```
//!
//! Upstream only does this with the `PreDownloadImageForInPlaceUpdate` feature gate (default
//! off) and the daemon enabled; the caller checks [`enabled`] first. When both revisions are the same
//! it deletes the CloneSet's pre-download jobs. Errors are for logging: upstream never fails a
//! CloneSet reconcile over pre-download.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1beta1::{
    CloneSet, CloneSetPodUpdateStrategyType, CompletionPolicy, CompletionPolicyType, ImagePullJob,
    ImagePullJobPodSelector, ImagePullJobSpec, ImagePullJobTemplate, PullPolicy, SandboxConfig,
};
use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use super::intstr::{partition_replicas, scaled_value};

/// Whether the workload controllers pre-download images before in-place updates (upstream's
/// `isPreDownloadDisabled`, decided once when the controller is added).
pub fn enabled(gates: &FeatureGates) -> bool {
    gates.enabled(Gate::PreDownloadImageForInPlaceUpdate) && gates.enabled(Gate::KruiseDaemon)
}

/// CloneSets with at most this many replicas update too fast for pre-download to help.
pub const MIN_REPLICAS_TO_PREDOWNLOAD: i32 = 3;
/// Pull attempts of a pre-download job on each node.
const BACKOFF_LIMIT: i32 = 1;
/// Pre-download jobs are deleted this long after they finish.
const JOB_TTL_SECONDS: i32 = 600;

#[derive(Debug, thiserror::Error)]
pub enum PreDownloadError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("revision {0} has no readable pod template: {1}")]
    Revision(String, String),
    #[error("invalid CloneSet numbers: {0}")]
    Numbers(String),
}

/// What pre-download should do for a CloneSet now.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Current and update revision are the same: remove the CloneSet's pre-download jobs.
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

fn annotation<'a>(cs: &'a CloneSet, key: &str) -> Option<&'a str> {
    cs.annotations().get(key).map(String::as_str)
}

fn in_place_strategy(cs: &CloneSet) -> Option<&kruise_api::appspub::InPlaceUpdateStrategy> {
    cs.spec
        .update_strategy
        .rolling_update
        .as_ref()
        .and_then(|r| r.in_place_update_strategy.as_ref())
}

/// Updated ready pods required first: the v1beta1 field, else the v1alpha1 annotation.
fn min_updated_ready_pods(cs: &CloneSet) -> i32 {
    in_place_strategy(cs)
        .and_then(|s| s.image_pre_download_min_updated_ready_pods)
        .or_else(|| {
            annotation(
                cs,
                keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_ANNOTATION,
            )
            .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Nodes pulling at once: the v1beta1 field, else the annotation, else 1.
fn job_parallelism(cs: &CloneSet) -> IntOrString {
    in_place_strategy(cs)
        .and_then(|s| s.image_pre_download_parallelism.clone())
        .or_else(|| {
            annotation(cs, keys::IMAGE_PREDOWNLOAD_PARALLELISM_ANNOTATION)
                .and_then(|v| v.trim().parse().ok())
                .map(IntOrString::Int)
        })
        .unwrap_or(IntOrString::Int(1))
}

/// Per-attempt pull timeout: the v1beta1 field, else the annotation, else the default.
fn job_timeout(cs: &CloneSet) -> i32 {
    in_place_strategy(cs)
        .and_then(|s| s.image_pre_download_timeout_seconds)
        .or_else(|| {
            annotation(cs, keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_ANNOTATION)
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(keys::DEFAULT_IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS)
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

fn revision_hash_label(rev: &ControllerRevision) -> String {
    rev.labels()
        .get(keys::CONTROLLER_REVISION_HASH_LABEL)
        .cloned()
        .unwrap_or_default()
}

/// The pre-download jobs for the images that change between the two revisions.
pub fn jobs_for(
    cs: &CloneSet,
    current: &ControllerRevision,
    update: &ControllerRevision,
) -> Result<Vec<ImagePullJob>, PreDownloadError> {
    let how = JobSettings {
        parallelism: job_parallelism(cs),
        timeout_seconds: job_timeout(cs),
    };
    let images = changed_images(current, update)?;
    Ok(pull_jobs(
        cs,
        &cs.spec.selector,
        &cs.spec.template,
        update,
        images,
        &how,
    ))
}

/// How each node of a pre-download job pulls.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSettings {
    /// Nodes pulling at once.
    pub parallelism: IntOrString,
    /// Per-attempt pull timeout.
    pub timeout_seconds: i32,
}

/// One ImagePullJob per image (container name → image), owned by the workload `owner`, pulling
/// on the nodes of its Pods (`selector`) that are not at `update` yet (upstream
/// `CreateJobForWorkload`, shared by CloneSet and Advanced DaemonSet).
pub fn pull_jobs<K: Resource<DynamicType = ()>>(
    owner: &K,
    selector: &LabelSelector,
    tpl: &PodTemplateSpec,
    update: &ControllerRevision,
    images: BTreeMap<String, String>,
    how: &JobSettings,
) -> Vec<ImagePullJob> {
    let pull_secrets: Vec<String> = tpl
        .spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.as_ref())
        .map(|v| v.iter().map(|s| s.name.clone()).collect())
        .unwrap_or_default();
    // Pods not at the update revision yet, whichever form (full name or hash) they carry.
    let mut selector = selector.clone();
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
        keys::CONTROLLER_REVISION_HASH_LABEL.to_string(),
        revision_hash_label(update),
    );
    let annotations = tpl
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    let owner_ref = owner.controller_owner_ref(&());
    images
        .into_iter()
        .map(|(container, image)| ImagePullJob {
            metadata: ObjectMeta {
                name: Some(format!("{}-{container}", update.name_any())),
                namespace: owner.meta().namespace.clone(),
                labels: Some(labels.clone()),
                owner_references: owner_ref.clone().map(|o| vec![o]),
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
                    parallelism: Some(how.parallelism.clone()),
                    pull_policy: Some(PullPolicy {
                        timeout_seconds: Some(how.timeout_seconds),
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
    cs: &CloneSet,
    current: &ControllerRevision,
    update: &ControllerRevision,
    can_update_in_place: bool,
) -> Result<Decision, PreDownloadError> {
    if current.name_any() == update.name_any() {
        return Ok(Decision::DeleteJobs);
    }
    let replicas = cs.spec.replicas.unwrap_or(1);
    let min_ready = scaled_value(
        &IntOrString::Int(min_updated_ready_pods(cs)),
        replicas,
        true,
    )
    .map_err(|e| PreDownloadError::Numbers(e.to_string()))?;
    let status = cs.status.clone().unwrap_or_default();
    let updated_ready = if status.update_revision == update.name_any() {
        status.updated_ready_replicas
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
    let Some(rolling) = cs.spec.update_strategy.rolling_update.as_ref() else {
        return Ok(Decision::Ignore("update policy is ReCreate"));
    };
    if rolling.pod_update_policy == Some(CloneSetPodUpdateStrategyType::ReCreate) {
        return Ok(Decision::Ignore("update policy is ReCreate"));
    }
    if replicas <= MIN_REPLICAS_TO_PREDOWNLOAD {
        return Ok(Decision::Ignore("too few replicas"));
    }
    let partition = partition_replicas(rolling.partition.as_ref(), replicas)
        .map_err(|e| PreDownloadError::Numbers(e.to_string()))?;
    let max_unavailable = scaled_value(
        rolling
            .max_unavailable
            .as_ref()
            .unwrap_or(&IntOrString::String(
                keys::DEFAULT_CLONESET_MAX_UNAVAILABLE.into(),
            )),
        replicas,
        false,
    )
    .map_err(|e| PreDownloadError::Numbers(e.to_string()))?;
    if partition == 0 && max_unavailable >= replicas {
        return Ok(Decision::Ignore("all pods update in one batch"));
    }
    if !can_update_in_place {
        return Ok(Decision::Ignore("the revision cannot be applied in place"));
    }
    Ok(Decision::Create(jobs_for(cs, current, update)?))
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

/// Creates (or cleans up) the pre-download ImagePullJobs of `cloneset` for the move from
/// `current_revision` to `update_revision`. Idempotent: safe to call on every reconcile.
pub async fn ensure_predownload_jobs(
    client: &Client,
    cloneset: &CloneSet,
    current_revision: &ControllerRevision,
    update_revision: &ControllerRevision,
    can_update_in_place: bool,
) -> Result<Outcome, PreDownloadError> {
    let decision = decide(
        cloneset,
        current_revision,
        update_revision,
        can_update_in_place,
    )?;
    apply(client, cloneset, update_revision, decision).await
}

/// Carries out a [`Decision`] for the workload `owner` (CloneSet or Advanced DaemonSet):
/// creates its jobs, deletes them, or labels `update_revision` so it is handled once.
pub async fn apply<K: Resource<DynamicType = ()>>(
    client: &Client,
    owner: &K,
    update_revision: &ControllerRevision,
    decision: Decision,
) -> Result<Outcome, PreDownloadError> {
    let ns = owner.meta().namespace.clone().unwrap_or_default();
    let workload = owner.meta().name.clone().unwrap_or_default();
    let jobs: Api<ImagePullJob> = Api::namespaced(client.clone(), &ns);
    let mut out = Outcome::default();
    match decision {
        Decision::DeleteJobs => {
            // Jobs exist only for a revision labelled when they were created: a settled
            // CloneSet costs no API call here, on every reconcile.
            if !update_revision
                .labels()
                .contains_key(keys::IMAGE_PREDOWNLOAD_CREATED_LABEL)
            {
                return Ok(out);
            }
            let uid = owner.meta().uid.clone().unwrap_or_default();
            for j in jobs.list(&ListParams::default()).await?.items {
                let ours = j
                    .owner_references()
                    .iter()
                    .any(|o| o.controller == Some(true) && o.uid == uid);
                if !ours || j.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                match jobs.delete(&j.name_any(), &Default::default()).await {
                    Ok(_) => {
                        tracing::info!(workload = %workload, namespace = %ns, job = %j.name_any(), "deleted pre-download ImagePullJob");
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
            tracing::debug!(workload = %workload, namespace = %ns, reason, "no image pre-download");
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
                        tracing::info!(workload = %workload, namespace = %ns, job = %name, image = %job.spec.image, "created pre-download ImagePullJob");
                        out.created.push(name);
                    }
                    Err(kube::Error::Api(e)) if e.is_already_exists() => {}
                    // Upstream carries on with the other images and still labels the revision.
                    Err(e) => {
                        tracing::warn!(workload = %workload, namespace = %ns, job = %name, error = %e, "failed to create pre-download ImagePullJob");
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
