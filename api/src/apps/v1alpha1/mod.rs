//! apps.kruise.io/v1alpha1: still served, converted to v1beta1 for storage. Nested types whose
//! JSON did not change between versions are re-exported from v1beta1.

mod cloneset;
mod containerrecreaterequest;
mod imagepulljob;
mod nodeimage;
mod statefulset;

pub use crate::appspub::{UpdateScatterStrategy, UpdateScatterTerm};
pub use cloneset::{
    CloneSet, CloneSetCondition, CloneSetScaleStrategy, CloneSetSpec, CloneSetStatus,
    CloneSetUpdateStrategy, CloneSetUpdateStrategyType,
};
pub use containerrecreaterequest::{
    ContainerRecreateRequest, ContainerRecreateRequestContainer,
    ContainerRecreateRequestContainerContext, ContainerRecreateRequestContainerRecreateState,
    ContainerRecreateRequestFailurePolicyType, ContainerRecreateRequestPhase,
    ContainerRecreateRequestSpec, ContainerRecreateRequestStatus, ContainerRecreateRequestStrategy,
    ContainerRecreateRequestSyncContainerStatus, ContainerRecreateRequestSyncContainerStatuses,
    ProbeHandler,
};
pub use imagepulljob::{
    CompletionPolicy, CompletionPolicyType, FailedImageStatus, ImageListPullJob,
    ImageListPullJobSpec, ImageListPullJobStatus, ImagePullJob, ImagePullJobNodeSelector,
    ImagePullJobPodSelector, ImagePullJobSpec, ImagePullJobStatus, ImagePullJobTemplate,
    ImagePullPolicy, PullPolicy, SandboxConfig,
};
pub use nodeimage::{
    ImagePullPhase, ImageSpec, ImageStatus, ImageTagPullPolicy, ImageTagSpec, ImageTagStatus,
    NodeImage, NodeImageSpec, NodeImageStatus, ReferenceObject, SyncStatus, SyncStatusPhase,
};
pub use statefulset::{
    PodManagementPolicyType, PodUpdateStrategyType, RollingUpdateStatefulSetStrategy, StatefulSet,
    StatefulSetCondition, StatefulSetSpec, StatefulSetStatus, StatefulSetUpdateStrategy,
    StatefulSetUpdateStrategyType, UnorderedUpdateStrategy,
};
