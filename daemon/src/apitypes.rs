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

/// How `K` is read and written at its CRD's storage version
/// ([`kruise_api::crds::STORAGE_VERSIONS`]), converted in process with the conversion webhook's
/// own functions: no conversion webhook call per watch event or write.
pub fn stored<K>() -> kruise_runtime::stored::Stored<K>
where
    K: kube::CustomResourceExt
        + kube::Resource<DynamicType = ()>
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug
        + Send
        + 'static,
{
    let version = kruise_api::crds::storage_version(K::crd_name());
    kruise_runtime::stored::Stored::new(version, kruise_webhook::converter(&K::kind(&())))
}
