//! Specified delete (upstream `pkg/util/specifieddelete`): a Pod labelled
//! `apps.kruise.io/specified-delete` is deleted (and replaced) by its workload first. Users set
//! the label to pick Pods; a workload sets it to recreate a Pod it cannot update in place.

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use serde_json::{Value, json};

use super::podutil;

/// Whether the Pod is marked for specified delete (any value counts, as upstream).
pub fn is_specified_delete(pod: &Pod) -> bool {
    podutil::label(pod, keys::SPECIFIED_DELETE_LABEL).is_some()
}

/// The metadata patch that marks a Pod for specified delete.
pub fn mark_patch() -> Value {
    json!({ "metadata": { "labels": { keys::SPECIFIED_DELETE_LABEL: "true" } } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::podutil::testpod::*;

    #[test]
    fn any_label_value_marks_the_pod() {
        assert!(!is_specified_delete(&pod("a").build()));
        let marked = pod("a").label(keys::SPECIFIED_DELETE_LABEL, "true").build();
        assert!(is_specified_delete(&marked));
        let other = pod("a").label(keys::SPECIFIED_DELETE_LABEL, "").build();
        assert!(is_specified_delete(&other));
        assert_eq!(
            mark_patch(),
            json!({"metadata": {"labels": {"apps.kruise.io/specified-delete": "true"}}})
        );
    }
}
