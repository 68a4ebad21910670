//! The apps.kruise.io kinds the daemon reads and writes, from kruise-api (one import point so
//! the duties do not care which version module they come from).

pub use kruise_api::apps::v1beta1::{
    ContainerRecreateRequest, ContainerRecreateRequestContainer,
    ContainerRecreateRequestContainerContext,
    ContainerRecreateRequestContainerRecreateState as ContainerRecreateState,
    ContainerRecreateRequestFailurePolicyType as FailurePolicy,
    ContainerRecreateRequestPhase as CrrPhase, ContainerRecreateRequestSpec,
    ContainerRecreateRequestStatus, ContainerRecreateRequestStrategy,
    ContainerRecreateRequestSyncContainerStatus as SyncContainerStatus, ImagePullPhase,
    ImagePullPolicy, ImageSpec, ImageStatus, ImageTagPullPolicy, ImageTagSpec, ImageTagStatus,
    NodeImage, NodeImageSpec, NodeImageStatus, ProbeHandler, ReferenceObject, SandboxConfig,
};

#[cfg(test)]
pub use kruise_api::apps::v1beta1::SyncStatus as SyncStatusForTests;
