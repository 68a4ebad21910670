//! Claim resizing of one sync (upstream `TryPatchPVC`), under `StatefulSetAutoResizePVCGate`
//! with `volumeClaimUpdateStrategy.type: OnPodRollingUpdate`.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};

use super::claims;
use super::error::Error;
use super::plan::ClaimState;
use super::sync::SyncPass;
use crate::workload::podutil;

impl SyncPass<'_> {
    /// Where the claims of `pod` stand for the update plan.
    pub(super) fn claim_state(&self, pod: &Pod) -> ClaimState {
        if !self.resize {
            return ClaimState::SETTLED;
        }
        ClaimState {
            matched: claims::pod_claims_match(self.sts, pod, self.claims),
            ready: claims::pod_claims_ready(self.sts, pod, self.claims),
        }
    }

    /// Under [`claims::resize_on_update`], patches the claims of `pod` smaller than their
    /// template to the template's size (upstream `TryPatchPVC`), after checking that only the
    /// size differs and that the StorageClass allows expansion. Returns whether every claim
    /// has finished resizing (always true without the strategy).
    pub(super) async fn resize_claims(&self, pod: &Pod) -> Result<bool, Error> {
        if !self.resize {
            return Ok(true);
        }
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.ctx.client.clone(), self.ns);
        let mut completed = true;
        for (claim, tpl) in claims::of_pod(self.sts, pod, self.claims) {
            if claims::matches(claim, tpl) {
                completed &= claims::resize_completed(claim, tpl);
                continue;
            }
            let name = claim.name_any();
            let refuse = |reason: String| Error::Resize {
                claim: name.clone(),
                pod: podutil::name(pod).to_owned(),
                reason,
            };
            if !claims::compatible_without_size(claim, tpl) {
                self.ctx
                    .event(
                        self.sts,
                        EventType::Warning,
                        "FailedUpdatePVC",
                        format!("failed to update pvc {name}: contains diff other than spec resource, wait pvc to be deleted"),
                        None,
                    )
                    .await;
                return Err(refuse(
                    "it differs from its template in more than its size; delete it to have it made again".into(),
                ));
            }
            if let Some(sc) = claim
                .spec
                .as_ref()
                .and_then(|s| s.storage_class_name.as_deref())
            {
                let classes: Api<StorageClass> = Api::all(self.ctx.client.clone());
                let allows = classes
                    .get_opt(sc)
                    .await?
                    .ok_or_else(|| refuse(format!("storage class {sc} not found")))?
                    .allow_volume_expansion;
                if allows != Some(true) {
                    return Err(refuse(format!(
                        "storage class {sc} does not support volume expansion"
                    )));
                }
            }
            let patch = claims::resize_patch(self.sts, tpl);
            let res = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            let (type_, reason, note) = match &res {
                Ok(_) => (
                    EventType::Normal,
                    "SuccessfulResize",
                    format!(
                        "resize Claim {name} Pod {} in StatefulSet {} success",
                        podutil::name(pod),
                        self.sts.name_any()
                    ),
                ),
                Err(e) => (
                    EventType::Warning,
                    "FailedResize",
                    format!(
                        "resize Claim {name} for Pod {} in StatefulSet {} failed error: {e}",
                        podutil::name(pod),
                        self.sts.name_any()
                    ),
                ),
            };
            self.ctx.event(self.sts, type_, reason, note, None).await;
            let patched = res?;
            tracing::info!(pvc = %name, "resized claim to its template");
            completed &= claims::resize_completed(&patched, tpl);
        }
        Ok(completed)
    }
}
