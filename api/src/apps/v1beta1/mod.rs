//! apps.kruise.io/v1beta1: the storage version of the kinds OpenKruise v1.9.0 stores as v1beta1;
//! served only for the seven it has in v1alpha1 alone (`crate::crds::STORAGE_VERSIONS`).

mod advancedcronjob;
mod broadcastjob;
mod cloneset;
mod containerrecreaterequest;
mod daemonset;
mod imagelistpulljob;
mod imagepulljob;
mod nodeimage;
mod persistentpodstate;
mod resourcedistribution;
mod sidecarset;
mod statefulset;
mod uniteddeployment;
mod workloadspread;

pub use crate::appspub::{UpdateScatterStrategy, UpdateScatterTerm};
pub use advancedcronjob::{
    AdvancedCronJob, AdvancedCronJobSpec, AdvancedCronJobStatus, BroadcastJobTemplateSpec,
    ConcurrencyPolicy, CronJobTemplate, ImageListPullJobTemplateSpec, TemplateKind,
};
pub use broadcastjob::{
    BroadcastJob, BroadcastJobPhase, BroadcastJobSpec, BroadcastJobStatus, FailurePolicy,
    FailurePolicyType, JobCondition, JobConditionType,
};
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
pub use daemonset::{
    DaemonSet, DaemonSetCondition, DaemonSetScaleStrategy, DaemonSetSpec, DaemonSetStatus,
    DaemonSetUpdateStrategy, DaemonSetUpdateStrategyType, RollingUpdateDaemonSet,
    RollingUpdateType,
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
pub use persistentpodstate::{
    NodeTopologyTerm, PersistentPodAnnotation, PersistentPodState, PersistentPodStateSpec,
    PersistentPodStateStatus, PodState, PreferredTopologyTerm,
};
pub use resourcedistribution::{
    ResourceDistribution, ResourceDistributionCondition, ResourceDistributionNamespace,
    ResourceDistributionSpec, ResourceDistributionStatus, ResourceDistributionTargetNamespaces,
    ResourceDistributionTargets,
};
pub use sidecarset::{
    PodInjectPolicyType, ResourceExprs, ResourcesExpr, ResourcesPolicy, ShareVolumePolicy,
    ShareVolumePolicyType, SidecarContainer, SidecarContainerUpgradeStrategy,
    SidecarContainerUpgradeType, SidecarSet, SidecarSetCondition, SidecarSetInjectRevision,
    SidecarSetInjectRevisionPolicy, SidecarSetInjectionStrategy, SidecarSetPatchPodMetadata,
    SidecarSetPatchPolicyType, SidecarSetSpec, SidecarSetStatus, SidecarSetUpdateStrategy,
    SidecarSetUpdateStrategyType, SourceContainerNameSource, TargetContainersMode, TransferEnvVar,
};
pub use statefulset::{
    InvalidReserveOrdinal, MAX_MIN_READY_SECONDS, PersistentVolumeClaimRetentionPolicyType,
    PodManagementPolicyType, PodUpdateStrategyType, RollingUpdateStatefulSetStrategy, StatefulSet,
    StatefulSetCondition, StatefulSetOrdinals, StatefulSetPersistentVolumeClaimRetentionPolicy,
    StatefulSetScaleStrategy, StatefulSetSpec, StatefulSetStatus, StatefulSetUpdateStrategy,
    StatefulSetUpdateStrategyType, UnorderedUpdateStrategy, VolumeClaimStatus,
    VolumeClaimUpdateStrategy, VolumeClaimUpdateStrategyType,
};
pub use uniteddeployment::{
    AdaptiveUnitedDeploymentStrategy, AdvancedStatefulSetTemplateSpec, CloneSetTemplateSpec,
    K8sTemplateSpec, ManualUpdate, Subset, SubsetTemplate, Topology, UD_CONDITION_SUBSET_FAILURE,
    UD_CONDITION_SUBSET_PROVISIONED, UD_CONDITION_SUBSET_UPDATED, UD_CONDITION_UPDATED,
    UD_DEFAULT_RESCHEDULE_CRITICAL_SECONDS, UD_DEFAULT_UNSCHEDULABLE_DURATION_SECONDS,
    UD_RESERVED_POD_LABEL, UD_SCHEDULE_ADAPTIVE, UD_SCHEDULE_FIXED,
    UD_SUBSET_CONDITION_SCHEDULABLE, UD_SUBSET_REASON_CREATED, UD_SUBSET_REASON_RECOVER,
    UD_SUBSET_REASON_RESCHEDULE, UD_UPDATE_MANUAL, UnitedDeployment, UnitedDeploymentCondition,
    UnitedDeploymentScheduleStrategy, UnitedDeploymentSpec, UnitedDeploymentStatus,
    UnitedDeploymentSubsetCondition, UnitedDeploymentSubsetStatus, UnitedDeploymentUpdateStrategy,
};
pub use workloadspread::{
    AdaptiveWorkloadSpreadStrategy, TargetFilter, WorkloadSpread, WorkloadSpreadScheduleStrategy,
    WorkloadSpreadSpec, WorkloadSpreadStatus, WorkloadSpreadSubset, WorkloadSpreadSubsetStatus,
};
