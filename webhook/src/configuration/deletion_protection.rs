//! The object selector of deletion protection's hooks ([`crate::paths::Objects::DeletionProtected`];
//! the hooks are upstream's, `pkg/webhook/{namespace,customresourcedefinition,service,ingress,
//! builtinworkloads}/validating`, declared in [`crate::paths::HOOKS`]).
//!
//! The selector is ours: only objects carrying the label are sent to us. The handler admits every
//! other object anyway; without the selector, a manager that is down (or being uninstalled: its
//! own Deployment, Service and Namespace go last) would make every Namespace, Deployment,
//! ReplicaSet and StatefulSet deletion in the cluster fail.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use kruise_api::keys;

/// Objects (the old object, on DELETE) that carry the protection label, whatever its value.
pub(super) fn labelled() -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: keys::DELETE_PROTECTION_LABEL.to_owned(),
            operator: "Exists".to_owned(),
            values: None,
        }]),
        match_labels: None,
    }
}
