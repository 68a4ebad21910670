//! Names owned by Kubernetes itself that the plugin reads or writes and that `kruise_api::keys`
//! does not carry yet. Kruise names come from `kruise_api::keys` directly.

/// apps/v1 Deployment revision annotation (Kubernetes).
pub const DEPLOYMENT_REVISION: &str = "deployment.kubernetes.io/revision";
/// Annotation kubectl and others use to record why a revision was made (Kubernetes).
pub const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";
/// Pod-template annotation `kubectl rollout restart` sets (Kubernetes).
pub const KUBECTL_RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";
