//! The well-known names the plugin reads and writes.
//!
//! Kruise names come from `kruise_api::keys` (defined once there); only names owned by
//! Kubernetes itself that `kruise_api` does not carry are defined here.

pub use kruise_api::keys::{
    APPS_GROUP as KRUISE_GROUP, CLONESET_CONDITION_FAILED_UPDATE, CLONESET_CONDITION_PROGRESSING,
    CLONESET_REASON_PROGRESS_DEADLINE_EXCEEDED,
    CONTROLLER_REVISION_HASH_LABEL as CONTROLLER_REVISION_HASH,
    INPLACE_UPDATE_GRACE_ANNOTATION as INPLACE_UPDATE_GRACE,
    INPLACE_UPDATE_GRACE_ANNOTATION_OLD as INPLACE_UPDATE_GRACE_OLD, INPLACE_UPDATE_READY,
    INPLACE_UPDATE_STATE_ANNOTATION as INPLACE_UPDATE_STATE,
    INPLACE_UPDATE_STATE_ANNOTATION_OLD as INPLACE_UPDATE_STATE_OLD,
    LIFECYCLE_STATE_LABEL as LIFECYCLE_STATE, POD_TEMPLATE_HASH_LABEL as POD_TEMPLATE_HASH,
};

/// apps/v1 Deployment revision annotation (Kubernetes).
pub const DEPLOYMENT_REVISION: &str = "deployment.kubernetes.io/revision";
/// Annotation kubectl and others use to record why a revision was made (Kubernetes).
pub const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";
/// Pod-template annotation `kubectl rollout restart` sets (Kubernetes).
pub const KUBECTL_RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";
