//! `ephemeraljob pause|resume` (`spec.paused`): a paused EphemeralJob injects into no further
//! Pod; the containers it already injected run on (they cannot be stopped from outside).

use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::json;

use crate::ctx::Ctx;
use crate::error::{Result, exit, kube_err};

const PLURAL: &str = "ephemeraljobs";

pub async fn pause(ctx: &Ctx, name: &str, paused: bool) -> Result<i32> {
    let (jobs, _) = ctx.kruise_api(PLURAL, Some(&ctx.namespace)).await?;
    let _: DynamicObject = jobs
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"paused": paused}})),
        )
        .await
        .map_err(kube_err)?;
    println!(
        "ephemeraljob/{name} {}",
        if paused { "paused" } else { "resumed" }
    );
    Ok(exit::OK)
}
