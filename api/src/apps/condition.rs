//! [`Condition`](crate::condition::Condition) for every apps.kruise.io condition type, each
//! with the rules of its kind's upstream `Set…Condition`.

use super::v1alpha1::{
    EphemeralJobCondition, EphemeralJobConditionType,
    ResourceDistributionCondition as AlphaResourceDistributionCondition,
    WorkloadSpreadSubsetCondition,
};
use super::v1beta1::{
    CloneSetCondition, DaemonSetCondition, JobCondition, JobConditionType,
    ResourceDistributionCondition, SidecarSetCondition, StatefulSetCondition,
    UnitedDeploymentCondition, UnitedDeploymentSubsetCondition,
};
use crate::condition::{SetRules, impl_condition};

impl_condition!(CloneSetCondition, str, SetRules::UPSTREAM, last_update_time);
impl_condition!(StatefulSetCondition, str, SetRules::UPSTREAM);
impl_condition!(DaemonSetCondition, str, SetRules::UPSTREAM);
impl_condition!(SidecarSetCondition, str, SetRules::UPSTREAM);
impl_condition!(JobCondition, JobConditionType, SetRules::UPSTREAM);
// ResourceDistribution's conditions carry namespaces instead of a message.
impl_condition!(
    ResourceDistributionCondition,
    str,
    SetRules::UPSTREAM,
    no_message
);
impl_condition!(
    AlphaResourceDistributionCondition,
    str,
    SetRules::UPSTREAM,
    no_message
);
// Upstream `SetUnitedDeploymentCondition`: the message alone is no change.
impl_condition!(
    UnitedDeploymentCondition,
    str,
    SetRules {
        message_matters: false,
        ..SetRules::UPSTREAM
    }
);
// Upstream's subset `SetCondition`: rewritten in place, its transition time with it.
impl_condition!(
    UnitedDeploymentSubsetCondition,
    str,
    SetRules {
        message_matters: false,
        keep_transition_time: false,
        move_to_end: false,
    }
);
// Upstream `setWorkloadSpreadSubsetCondition`, kept in place.
impl_condition!(
    WorkloadSpreadSubsetCondition,
    str,
    SetRules {
        message_matters: false,
        keep_transition_time: true,
        move_to_end: false,
    }
);
// Each type is set once (status True): a new reason or message rewrites it whole, in place.
impl_condition!(
    EphemeralJobCondition,
    EphemeralJobConditionType,
    SetRules {
        message_matters: true,
        keep_transition_time: false,
        move_to_end: false,
    }
);
