//! apps.kruise.io/v1beta1: the storage version of every kind that has two versions.

mod cloneset;
mod containerrecreaterequest;
mod imagelistpulljob;
mod imagepulljob;
mod nodeimage;
mod statefulset;

pub use crate::appspub::{UpdateScatterStrategy, UpdateScatterTerm};
pub use cloneset::{
    CloneSet, CloneSetCondition, CloneSetPodUpdateStrategyType, CloneSetScaleStrategy,
    CloneSetSpec, CloneSetStatus, CloneSetUpdateStrategy, CloneSetUpdateStrategyType,
    RollingUpdateCloneSetStrategy,
};
pub use containerrecreaterequest::{
    ContainerRecreateRequest, ContainerRecreateRequestContainer,
    ContainerRecreateRequestContainerContext, ContainerRecreateRequestContainerRecreateState,
    ContainerRecreateRequestFailurePolicyType, ContainerRecreateRequestPhase,
    ContainerRecreateRequestSpec, ContainerRecreateRequestStatus, ContainerRecreateRequestStrategy,
    ContainerRecreateRequestSyncContainerStatus, ContainerRecreateRequestSyncContainerStatuses,
    ProbeHandler,
};
pub use imagelistpulljob::{
    FailedImageStatus, ImageListPullJob, ImageListPullJobSpec, ImageListPullJobStatus,
};
pub use imagepulljob::{
    CompletionPolicy, CompletionPolicyType, ImagePullJob, ImagePullJobNodeSelector,
    ImagePullJobPodSelector, ImagePullJobSpec, ImagePullJobStatus, ImagePullJobTemplate,
    ImagePullPolicy, PullPolicy, SandboxConfig,
};
pub use nodeimage::{
    ImagePullPhase, ImageSpec, ImageStatus, ImageTagPullPolicy, ImageTagSpec, ImageTagStatus,
    NodeImage, NodeImageSpec, NodeImageStatus, ReferenceObject, SyncStatus, SyncStatusPhase,
};
pub use statefulset::{
    InvalidReserveOrdinal, MAX_MIN_READY_SECONDS, PersistentVolumeClaimRetentionPolicyType,
    PodManagementPolicyType, PodUpdateStrategyType, RollingUpdateStatefulSetStrategy, StatefulSet,
    StatefulSetCondition, StatefulSetOrdinals, StatefulSetPersistentVolumeClaimRetentionPolicy,
    StatefulSetScaleStrategy, StatefulSetSpec, StatefulSetStatus, StatefulSetUpdateStrategy,
    StatefulSetUpdateStrategyType, UnorderedUpdateStrategy, VolumeClaimStatus,
    VolumeClaimUpdateStrategy, VolumeClaimUpdateStrategyType,
};
