//! The Advanced StatefulSet's side of the in-place engine's [`InPlaceHooks`].
//!
//! Upstream's StatefulSet passes no `UpdateOptions` hooks of its own and uses the default
//! revision adapter: pods carry the full revision name in `controller-revision-hash`, exactly as
//! CloneSet's do. So every hook keeps the engine's default; the type exists so the engine is
//! driven through this workload's own implementation (one place to change if that ever
//! differs), never through a copy of the engine.

use crate::inplace::InPlaceHooks;

/// The hooks Advanced StatefulSet uses.
#[derive(Clone, Copy, Debug, Default)]
pub struct AstsHooks;

impl InPlaceHooks for AstsHooks {}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kruise_api::keys;

    #[test]
    fn revision_label_is_controller_revision_hash() {
        let mut pod = Pod::default();
        AstsHooks.write_revision(&mut pod, "web-7d9f");
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels[keys::CONTROLLER_REVISION_HASH_LABEL], "web-7d9f");
        assert!(AstsHooks.equals_revision(&pod, "web-7d9f"));
        assert!(!AstsHooks.equals_revision(&pod, "web-other"));
    }
}
