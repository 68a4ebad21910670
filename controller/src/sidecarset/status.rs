//! Writes the SidecarSet status the plan computed, when it changed.

use kruise_api::apps::v1beta1::{SidecarSet, SidecarSetStatus};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

use super::context::Context;
use super::error::Error;

/// A merge patch of `status` (clearing fields it omits) unless the SidecarSet has it already.
pub(super) async fn write(
    ctx: &Context,
    set: &SidecarSet,
    status: &SidecarSetStatus,
) -> Result<(), Error> {
    if set.status.as_ref() == Some(status) {
        return Ok(());
    }
    let api: Api<SidecarSet> = Api::all(ctx.client.clone());
    let patch = status.merge_patch()?;
    api.patch_status(
        &set.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}
