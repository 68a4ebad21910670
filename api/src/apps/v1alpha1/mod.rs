//! apps.kruise.io/v1alpha1: served; the storage version of the kinds OpenKruise v1.9.0 has only
//! in v1alpha1 (`crate::crds::STORAGE_VERSIONS`), converted to v1beta1 for the others. Nested types whose
//! JSON did not change between versions are re-exported from v1beta1.

mod advancedcronjob;
mod broadcastjob;
mod cloneset;
mod containerrecreaterequest;
mod daemonset;
pub mod ephemeraljob;
mod imagepulljob;
mod nodeimage;
mod persistentpodstate;
mod persistentpodstate_whitelist;
pub mod podprobemarker;
mod resourcedistribution;
mod sidecarset;
mod statefulset;
mod uniteddeployment;
mod workloadspread;
mod workloadspread_whitelist;

pub use crate::appspub::{UpdateScatterStrategy, UpdateScatterTerm};
pub use advancedcronjob::{
    AdvancedCronJob, AdvancedCronJobSpec, AdvancedCronJobStatus, BroadcastJobTemplateSpec,
    ConcurrencyPolicy, CronJobTemplate, TemplateKind,
};
pub use broadcastjob::{
    BroadcastJob, BroadcastJobPhase, BroadcastJobSpec, BroadcastJobStatus, FailurePolicy,
    FailurePolicyType, JobCondition, JobConditionType,
};
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
pub use daemonset::{
    DaemonSet, DaemonSetCondition, DaemonSetScaleStrategy, DaemonSetSpec, DaemonSetStatus,
    DaemonSetUpdateStrategy, DaemonSetUpdateStrategyType, RollingUpdateDaemonSet,
    RollingUpdateType,
};
pub use ephemeraljob::{
    EphemeralContainerTemplateSpec, EphemeralJob, EphemeralJobCondition, EphemeralJobConditionType,
    EphemeralJobPhase, EphemeralJobSpec, EphemeralJobStatus,
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
pub use persistentpodstate::{
    GENERATED_PREFERRED_WEIGHT, NodeTopologyTerm, PersistentPodAnnotation, PersistentPodState,
    PersistentPodStateSpec, PersistentPodStateStatus, Placement, PodState, PreferredTopologyTerm,
    generated_spec, in_replicas, node_affinity, ordinal_of,
};
pub use persistentpodstate_whitelist::{
    PpsWhiteListError, PpsWorkloadWhiteList, is_pps_builtin_target,
};
pub use podprobemarker::{
    ContainerProbe, ContainerProbeState, NodePodProbe, NodePodProbeSpec, NodePodProbeStatus,
    PodContainerProbe, PodProbe, PodProbeMarker, PodProbeMarkerSpec, PodProbeMarkerStatus,
    PodProbeStatus, ProbeMarkerPolicy, ProbeState,
};
pub use resourcedistribution::{
    ConditionType as ResourceDistributionConditionType, DistributedResource, ResourceDistribution,
    ResourceDistributionCondition, ResourceDistributionNamespace, ResourceDistributionSpec,
    ResourceDistributionStatus, ResourceDistributionTargetNamespaces, ResourceDistributionTargets,
    ResourceError, SUPPORTED_KINDS, resource_hash,
};
pub use sidecarset::{SidecarSet, SidecarSetSpec};
pub use statefulset::{
    PodManagementPolicyType, PodUpdateStrategyType, RollingUpdateStatefulSetStrategy, StatefulSet,
    StatefulSetCondition, StatefulSetSpec, StatefulSetStatus, StatefulSetUpdateStrategy,
    StatefulSetUpdateStrategyType, UnorderedUpdateStrategy,
};
pub use uniteddeployment::{
    AdaptiveUnitedDeploymentStrategy, AdvancedStatefulSetTemplateSpec, CloneSetTemplateSpec,
    EARLIER_TEMPLATE_UPDATE_TYPE, K8sTemplateSpec, ManualUpdate, Subset, SubsetKind,
    SubsetReplicasError, SubsetTemplate, Topology, UD_CONDITION_SUBSET_FAILURE,
    UD_CONDITION_SUBSET_PROVISIONED, UD_CONDITION_SUBSET_UPDATED, UD_CONDITION_UPDATED,
    UD_DEFAULT_RESCHEDULE_CRITICAL_SECONDS, UD_DEFAULT_UNSCHEDULABLE_DURATION_SECONDS,
    UD_RESERVED_POD_LABEL, UD_SCHEDULE_ADAPTIVE, UD_SCHEDULE_FIXED,
    UD_SUBSET_CONDITION_SCHEDULABLE, UD_SUBSET_REASON_CREATED, UD_SUBSET_REASON_RECOVER,
    UD_SUBSET_REASON_RESCHEDULE, UD_UPDATE_MANUAL, UnitedDeployment, UnitedDeploymentCondition,
    UnitedDeploymentScheduleStrategy, UnitedDeploymentSpec, UnitedDeploymentStatus,
    UnitedDeploymentSubsetCondition, UnitedDeploymentSubsetStatus, UnitedDeploymentUpdateStrategy,
    UpdateStatus, parse_subset_replicas,
};
pub use workloadspread::{
    AdaptiveWorkloadSpreadStrategy, MatchedWorkloadSpread, ReplicasPathError, SCHEDULE_ADAPTIVE,
    SCHEDULE_FIXED, SUBSET_SCHEDULABLE, TargetFilter, WorkloadSpread,
    WorkloadSpreadScheduleStrategy, WorkloadSpreadSpec, WorkloadSpreadStatus, WorkloadSpreadSubset,
    WorkloadSpreadSubsetCondition, WorkloadSpreadSubsetStatus, pod_version, selects,
    versioned_kind, workload_replicas,
};
pub use workloadspread_whitelist::{
    CustomWorkload, CustomWorkloadWhiteList, GroupVersionKind as WsGroupVersionKind,
    WhiteListError, builtin_target_groups, is_builtin_target,
};
