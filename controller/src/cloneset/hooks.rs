//! CloneSet's side of the in-place engine's [`InPlaceHooks`]: every default but the revision
//! label, which holds only the short hash under the `CloneSetShortHash` gate (upstream
//! `revisionAdapterImpl.WriteRevisionHash` in `cloneset_utils.go`).
//!
//! Comparing stays the default ([`kruise_api::revision::equal_to_revision_hash`]): a Pod
//! labelled with either form belongs to the revision, so turning the gate on or off changes
//! the label new writes carry and never makes a Pod look outdated.

use k8s_openapi::api::core::v1::Pod;
use kruise_api::features::{FeatureGates, Gate};
use kruise_api::revision;

use crate::inplace::InPlaceHooks;

/// The hooks CloneSet uses.
#[derive(Clone, Copy, Debug, Default)]
pub struct CloneSetPodHooks {
    /// `CloneSetShortHash`: write the hash alone in `controller-revision-hash`.
    pub short_hash: bool,
}

impl CloneSetPodHooks {
    pub fn new(gates: &FeatureGates) -> Self {
        Self {
            short_hash: gates.enabled(Gate::CloneSetShortHash),
        }
    }
}

impl InPlaceHooks for CloneSetPodHooks {
    fn write_revision(&self, pod: &mut Pod, revision: &str) {
        let labels = pod.metadata.labels.get_or_insert_with(Default::default);
        if self.short_hash {
            revision::write_short_revision_labels(labels, revision);
        } else {
            revision::write_revision_labels(labels, revision);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_api::keys;

    fn labels_after(hooks: CloneSetPodHooks) -> (String, String) {
        let mut pod = Pod::default();
        hooks.write_revision(&mut pod, "web-7d9f");
        let l = pod.metadata.labels.unwrap_or_default();
        (
            l[keys::CONTROLLER_REVISION_HASH_LABEL].clone(),
            l[keys::POD_TEMPLATE_HASH_LABEL].clone(),
        )
    }

    #[test]
    fn the_gate_picks_the_label_form() {
        let off = CloneSetPodHooks::new(&FeatureGates::default());
        assert_eq!(labels_after(off), ("web-7d9f".into(), "7d9f".into()));
        let gates = FeatureGates::parse("CloneSetShortHash=true").expect("gates");
        let on = CloneSetPodHooks::new(&gates);
        assert_eq!(labels_after(on), ("7d9f".into(), "7d9f".into()));
    }

    /// A Pod labelled by either form is at the revision for both settings, so flipping the
    /// gate neither updates nor recreates it (upstream `EqualToRevisionHash`).
    #[test]
    fn both_forms_are_the_same_revision() {
        for writer in [false, true] {
            let mut pod = Pod::default();
            CloneSetPodHooks { short_hash: writer }.write_revision(&mut pod, "web-7d9f");
            for reader in [false, true] {
                let h = CloneSetPodHooks { short_hash: reader };
                assert!(h.equals_revision(&pod, "web-7d9f"), "{writer} {reader}");
                assert!(!h.equals_revision(&pod, "web-8e0a"), "{writer} {reader}");
            }
        }
    }
}
