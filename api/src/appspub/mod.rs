//! Types shared by every apps.kruise.io workload (upstream `apis/apps/pub`): the in-place
//! update records kept on pods, lifecycle hooks, update priority and scatter, pod readiness,
//! container launch priority.

mod inplace_update;
pub mod launch_priority;
mod lifecycle;
mod readiness;
mod update_priority;

pub use inplace_update::{
    InPlaceUpdateContainerBatch, InPlaceUpdateContainerStatus, InPlaceUpdatePreCheckBeforeNext,
    InPlaceUpdateState, InPlaceUpdateStrategy, RuntimeContainerHashes, RuntimeContainerMeta,
    RuntimeContainerMetaSet, UpdateSpec,
};
pub use lifecycle::{
    Lifecycle, LifecycleHook, LifecycleStateType, lifecycle_timestamp, lifecycle_timestamp_value,
    set_lifecycle_state,
};
pub use readiness::{
    PodReadinessMessage, add_readiness_message, dump_readiness_messages,
    kruise_pod_ready_condition, parse_readiness_messages, remove_readiness_message,
};
pub use update_priority::{
    UpdatePriorityOrderTerm, UpdatePriorityStrategy, UpdatePriorityWeightTerm,
    UpdateScatterStrategy, UpdateScatterTerm,
};
