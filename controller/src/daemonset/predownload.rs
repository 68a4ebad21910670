//! Image pre-download before an Advanced DaemonSet update (upstream
//! `createImagePullJobsForInPlaceUpdate` of `pkg/controller/daemonset`, under the
//! `PreDownloadImageForDaemonSetUpdate` gate): while a rollout is pending, one ImagePullJob per
//! changed image pulls it on the nodes of the Pods not at the update revision yet. The jobs,
//! their cleanup and the once-per-revision labels are the shared [`crate::workload::predownload`]
//! code CloneSet uses; only the decision is the DaemonSet's.

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1beta1::DaemonSet;
use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys;
use kube::ResourceExt;
use kube::runtime::events::EventType;

use super::context::Context;
use crate::workload::intstr::scaled_value;
use crate::workload::predownload::{
    self, Decision, PreDownloadError, Workload, changed_images_since, pull_jobs,
};

/// Whether the DaemonSet controller pre-downloads images (upstream decides it once, at start).
pub fn enabled(gates: &FeatureGates) -> bool {
    gates.enabled(Gate::PreDownloadImageForDaemonSetUpdate) && gates.enabled(Gate::KruiseDaemon)
}

/// The pure decision for `ds` now, `update` being its update revision (its Pods carry `hash`)
/// and `old` every other revision. A settled rollout removes the jobs; a revision is handled
/// once; an update that replaces every Pod in one batch has nothing to get ahead of.
pub fn decide(
    ds: &DaemonSet,
    hash: &str,
    update: &ControllerRevision,
    old: &[&ControllerRevision],
) -> Result<Decision, PreDownloadError> {
    let st = ds.status.clone().unwrap_or_default();
    if st.updated_number_scheduled == st.desired_number_scheduled && st.update_revision == hash {
        return Ok(Decision::DeleteJobs);
    }
    let labels = update.labels();
    if labels.contains_key(keys::IMAGE_PREDOWNLOAD_CREATED_LABEL)
        || labels.contains_key(keys::IMAGE_PREDOWNLOAD_IGNORED_LABEL)
    {
        return Ok(Decision::Done);
    }
    let desired = st.desired_number_scheduled;
    let ru = ds
        .spec
        .update_strategy
        .rolling_update
        .clone()
        .unwrap_or_default();
    let bad = |e: crate::workload::intstr::NumberError| PreDownloadError::Numbers(e.to_string());
    let partition = match &ru.partition {
        Some(p) => scaled_value(p, desired, false).map_err(bad)?,
        None => 0,
    };
    let max_unavailable = scaled_value(
        ru.max_unavailable.as_ref().unwrap_or(&IntOrString::Int(1)),
        desired,
        true,
    )
    .map_err(bad)?;
    if partition == 0 && max_unavailable >= desired {
        return Ok(Decision::Ignore("all pods update in one batch"));
    }
    let images = changed_images_since(old, update)?;
    // Without a name or uid yet there is nothing to own the jobs: the next sync will do.
    let Some(w) = Workload::daemonset(ds) else {
        return Ok(Decision::Wait);
    };
    Ok(Decision::Create(pull_jobs(&w, update, images)))
}

/// Creates or removes the DaemonSet's pre-download jobs. Best effort, as upstream: a failure is
/// logged and never holds up the rollout.
pub(super) async fn predownload_images(
    ctx: &Context,
    ds: &DaemonSet,
    hash: &str,
    update: &ControllerRevision,
    revisions: &[ControllerRevision],
) {
    let old: Vec<&ControllerRevision> = revisions
        .iter()
        .filter(|r| r.metadata.name != update.metadata.name)
        .collect();
    let Some(w) = Workload::daemonset(ds) else {
        return;
    };
    let outcome = match decide(ds, hash, update, &old) {
        Ok(d) => predownload::apply(&ctx.client, &w, update, d).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(out) => {
            for job in out.created {
                ctx.event(
                    ds,
                    EventType::Normal,
                    "CreatedImagePullJob",
                    format!("created ImagePullJob {job} to pre-download the new images"),
                )
                .await;
            }
        }
        Err(e) => {
            tracing::warn!(daemonset = %ds.name_any(), error = %e, "failed to pre-download images");
        }
    }
}

#[cfg(test)]
#[path = "predownload_tests.rs"]
mod tests;
