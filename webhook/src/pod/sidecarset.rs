//! The SidecarSet step of `/mutate-pod`, upstream `sidecarsetMutatingPod`
//! (`pkg/webhook/pod/mutating/sidecarset.go`): reads the SidecarSets (and the namespace when one
//! of them selects namespaces, and the revision an `injectionStrategy.revision` pins), then
//! injects through the pure [`crate::sidecarset::inject`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::{keys, sidecarset as wire};

use crate::review::{Outcome, Request};
use crate::sidecarset::inject::{self, InjectContext};
use crate::sidecarset::{SidecarSetLookup, revision};

/// What injection into the Pod of `req` reads from the cluster; the refusal to answer with
/// when it cannot be read.
pub(super) async fn read_context<C: SidecarSetLookup>(
    req: &Request,
    cluster: &C,
) -> Result<InjectContext, Outcome> {
    let sidecar_sets = match cluster.sidecar_sets().await {
        Ok(s) => s,
        Err(e) => return Err(Outcome::forbidden(e)),
    };
    let mut ctx = InjectContext {
        sidecar_sets,
        ..Default::default()
    };
    let pod_labels: BTreeMap<String, String> = req
        .object
        .as_ref()
        .and_then(|o| o.pointer("/metadata/labels"))
        .and_then(|l| crate::json::typed(l).ok())
        .unwrap_or_default();
    // `injectionStrategy.revision`: new Pods get the stored revision's sidecars, all of them
    // or (policy Partial) those the update strategy leaves out.
    for set in &mut ctx.sidecar_sets {
        let Some(rev) = set.spec.injection_strategy.revision.clone() else {
            continue;
        };
        match revision::injects_pinned(set, &pod_labels, rand::random::<f64>()) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                return Err(Outcome::invalid(format!(
                    "SidecarSet {}: {e}",
                    set.metadata.name.as_deref().unwrap_or_default()
                )));
            }
        }
        let found = match cluster.injection_revision(set, &rev).await {
            Ok(f) => f,
            Err(e) => return Err(Outcome::forbidden(e)),
        };
        let Some(found) = found else {
            continue;
        };
        let data = found.data.as_ref().map(|d| d.0.clone()).unwrap_or_default();
        let ann = found.metadata.annotations.clone().unwrap_or_default();
        match wire::restore_revision(set, &data, &ann) {
            Ok(restored) => {
                let name = set.metadata.name.clone().unwrap_or_default();
                ctx.revisions
                    .insert(name, found.metadata.name.clone().unwrap_or_default());
                *set = std::sync::Arc::new(restored);
            }
            Err(e) => {
                return Err(Outcome::forbidden(format!(
                    "revision {} of SidecarSet {}: {e}",
                    found.metadata.name.as_deref().unwrap_or_default(),
                    set.metadata.name.as_deref().unwrap_or_default()
                )));
            }
        }
    }
    if ctx
        .sidecar_sets
        .iter()
        .any(|s| s.spec.namespace_selector.is_some())
        && let Some(ns) = req.namespace.as_deref()
    {
        match cluster.namespace_labels(ns).await {
            Ok(l) => ctx.namespace_labels = l,
            Err(e) => return Err(Outcome::forbidden(e)),
        }
    }
    Ok(ctx)
}

/// Injects the matching SidecarSets into `pod`; whether it changed.
pub(super) fn mutate(pod: &mut Pod, ctx: &InjectContext, now: &Time) -> Result<bool, Outcome> {
    match inject::inject(pod, ctx, now) {
        // Sidecar upgrades take the Pod out of Service through this gate, as upstream.
        Ok(true) => {
            kruise_api::pod::add_readiness_gate(pod, keys::KRUISE_POD_READY);
            Ok(true)
        }
        Ok(false) => Ok(false),
        Err(e) => Err(Outcome::invalid(e.to_string())),
    }
}
