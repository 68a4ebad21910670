//! The status of a distribution (upstream `handleErrors` and `calculateNewStatus`), computed
//! purely from the round's failures, and its conflict-safe write.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1alpha1::{
    ResourceDistribution, ResourceDistributionCondition,
    ResourceDistributionConditionType as ConditionType, ResourceDistributionStatus,
};
use kruise_api::keys;
use kube::api::{Api, PostParams};

use super::context::Context;
use super::error::Error;

/// One namespace where a step failed, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub condition: ConditionType,
    pub namespace: String,
    /// Whether the namespace is targeted (a failure there lowers `succeeded`).
    pub targeted: bool,
    pub message: String,
}

/// The new status: `desired` targeted namespaces, those without a failure succeeded, one
/// condition of each type in upstream's order (True with its namespaces and the last error, or
/// False with `Succeeded`), a transition time kept while a condition's status stays.
pub fn compute(
    old: Option<&ResourceDistributionStatus>,
    generation: i64,
    desired: usize,
    failures: &[Failure],
    now: jiff::Timestamp,
) -> ResourceDistributionStatus {
    let mut by_type: BTreeMap<ConditionType, (Vec<String>, String)> = BTreeMap::new();
    for f in failures {
        let entry = by_type.entry(f.condition).or_default();
        entry.0.push(f.namespace.clone());
        entry.1 = f.message.clone();
    }
    let failed_targets = {
        let mut t: Vec<&str> = failures
            .iter()
            .filter(|f| f.targeted)
            .map(|f| f.namespace.as_str())
            .collect();
        t.sort_unstable();
        t.dedup();
        t.len()
    };
    let old_conditions = old.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let conditions = ConditionType::ALL
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let (mut namespaces, reason) = by_type.remove(t).unwrap_or_default();
            namespaces.sort();
            namespaces.dedup();
            let status = if namespaces.is_empty() {
                keys::k8s::CONDITION_FALSE
            } else {
                keys::k8s::CONDITION_TRUE
            };
            let kept = old_conditions
                .get(i)
                .filter(|c| c.type_ == t.as_str() && c.status == status)
                .and_then(|c| c.last_transition_time.clone());
            ResourceDistributionCondition {
                type_: t.as_str().to_owned(),
                status: status.to_owned(),
                last_transition_time: Some(kept.unwrap_or(Time(now))),
                reason: if namespaces.is_empty() {
                    keys::RD_REASON_SUCCEEDED.to_owned()
                } else {
                    reason
                },
                failed_namespaces: namespaces,
            }
        })
        .collect();
    let desired = i32::try_from(desired).unwrap_or(i32::MAX);
    let succeeded = desired - i32::try_from(failed_targets).unwrap_or(i32::MAX);
    ResourceDistributionStatus {
        desired,
        succeeded,
        failed: desired - succeeded,
        observed_generation: generation,
        conditions,
    }
}

/// The condition types that turned True in this round (each gets a Warning Event).
pub fn newly_true(
    old: Option<&ResourceDistributionStatus>,
    new: &ResourceDistributionStatus,
) -> Vec<ResourceDistributionCondition> {
    let was_true = |t: &str| {
        old.into_iter()
            .flat_map(|s| &s.conditions)
            .any(|c| c.type_ == t && c.status == keys::k8s::CONDITION_TRUE)
    };
    new.conditions
        .iter()
        .filter(|c| c.status == keys::k8s::CONDITION_TRUE && !was_true(&c.type_))
        .cloned()
        .collect()
}

/// Attempts before giving up to the runner's backoff.
const ATTEMPTS: usize = 3;

/// Writes `status` unless it is already current (upstream `updateDistributorStatus`);
/// `Ok(false)` when the distribution is gone.
pub async fn write(
    ctx: &Context,
    rd: &ResourceDistribution,
    status: &ResourceDistributionStatus,
) -> Result<bool, Error> {
    if rd.status.as_ref() == Some(status) {
        return Ok(true);
    }
    let name = rd.metadata.name.clone().unwrap_or_default();
    let api: Api<ResourceDistribution> = Api::all(ctx.client.clone());
    let mut current = rd.clone();
    for attempt in 1..=ATTEMPTS {
        current.status = Some(status.clone());
        match api
            .replace_status(&name, &PostParams::default(), &current)
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(false),
            Err(e) if crate::runner::is_conflict(&e) && attempt < ATTEMPTS => {
                match api.get_opt(&name).await? {
                    Some(fresh) => current = fresh,
                    None => return Ok(false),
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}
