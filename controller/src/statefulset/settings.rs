//! What the spec asks of one Advanced StatefulSet sync, read and checked once: the ordinal
//! range, the scale and rolling-update numbers, the update policy and the engine's options.

use kruise_api::apps::v1beta1::{
    PodManagementPolicyType, PodUpdateStrategyType, StatefulSet, StatefulSetUpdateStrategyType,
};
use kruise_api::features::{FeatureGates, Gate};

use super::error::Error;
use super::identity::OrdinalRange;
use super::plan::Rolling;
use crate::inplace::{Features, UpdateOptions};
use crate::workload::intstr::scaled_value;

/// What the spec asks of one sync, read and checked once.
pub(super) struct Settings {
    pub range: OrdinalRange,
    pub monotonic: bool,
    pub scale_max_unavailable: Option<i32>,
    pub rolling: Rolling,
    pub paused: bool,
    pub on_delete: bool,
    pub policy: PodUpdateStrategyType,
    pub opts: UpdateOptions,
}

pub(super) fn settings(sts: &StatefulSet, gates: &FeatureGates) -> Result<Settings, Error> {
    let replicas = sts.spec.replicas();
    let ru = sts
        .spec
        .update_strategy
        .rolling_update
        .clone()
        .unwrap_or_default();
    let max_unavailable = match &ru.max_unavailable {
        None => 1,
        Some(v) => scaled_value(v, replicas, false).map_err(|e| Error::Spec {
            field: "spec.updateStrategy.rollingUpdate.maxUnavailable",
            reason: e.to_string(),
        })?,
    };
    let scale_max_unavailable = match sts
        .spec
        .scale_strategy
        .as_ref()
        .and_then(|s| s.max_unavailable.as_ref())
    {
        None => None,
        Some(v) => Some(
            scaled_value(v, replicas, false)
                .map_err(|e| Error::Spec {
                    field: "spec.scaleStrategy.maxUnavailable",
                    reason: e.to_string(),
                })?
                .max(1),
        ),
    };
    let policy = ru.pod_update_policy.unwrap_or_default();
    let min_ready_seconds = ru.min_ready_seconds.unwrap_or(0);
    Ok(Settings {
        range: OrdinalRange::of(sts, gates)?,
        monotonic: sts.spec.pod_management_policy() == PodManagementPolicyType::OrderedReady,
        scale_max_unavailable,
        rolling: Rolling {
            partition: ru.partition.unwrap_or(0),
            max_unavailable: max_unavailable.max(1),
            unordered: ru.unordered_update.is_some(),
            priority: ru
                .unordered_update
                .as_ref()
                .and_then(|u| u.priority_strategy.clone()),
            replicas,
            min_ready_seconds,
            preparing_update_as_update: gates.enabled(Gate::PreparingUpdateAsUpdate),
        },
        paused: ru.paused,
        on_delete: sts.spec.update_strategy.type_ == Some(StatefulSetUpdateStrategyType::OnDelete),
        policy,
        opts: UpdateOptions {
            grace_period_seconds: ru
                .in_place_update_strategy
                .as_ref()
                .map_or(0, |s| s.grace_period_seconds),
            ignore_volume_claim_templates_hash_diff: true,
            features: Features::from_gates(gates),
            ..Default::default()
        },
    })
}
