//! The status of a UnitedDeployment (upstream `calculateStatus`, `setUpdatedCondition` and the
//! conditions `manageSubsets` sets). Pure.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1alpha1::{
    UD_CONDITION_SUBSET_FAILURE, UD_CONDITION_SUBSET_PROVISIONED, UD_CONDITION_SUBSET_UPDATED,
    UD_CONDITION_UPDATED, UD_RESERVED_POD_LABEL, UnitedDeployment, UnitedDeploymentCondition,
    UnitedDeploymentStatus, UnitedDeploymentSubsetCondition, UnitedDeploymentSubsetStatus,
    UpdateStatus,
};
use kruise_api::condition;

use super::plan::Observed;
use super::revisions::Revisions;

/// What the writes of this reconcile came to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Workloads were created or deleted (`SubsetProvisioned=True`).
    pub provisioned: bool,
    /// Why creating or deleting failed (`SubsetProvisioned=False`).
    pub provision_error: Option<String>,
    /// Why updating failed (`SubsetUpdated=False`).
    pub update_error: Option<String>,
    /// The subsets' conditions as Adaptive left them (by subset name); the others keep theirs.
    pub subset_conditions: BTreeMap<String, Vec<UnitedDeploymentSubsetCondition>>,
    /// Reserved Pods per subset, when the Adaptive strategy reserves unschedulable Pods (they
    /// are not counted in `replicas`, nor matched by `labelSelector`).
    pub reserved_pods: Option<BTreeMap<String, i32>>,
}

fn new_condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    now: &Time,
) -> UnitedDeploymentCondition {
    UnitedDeploymentCondition {
        type_: type_.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        last_transition_time: Some(now.clone()),
        reason: reason.to_owned(),
        message,
    }
}

/// The UnitedDeployment's own conditions: Updated, SubsetProvisioned, SubsetUpdated.
fn set_conditions(
    st: &mut UnitedDeploymentStatus,
    revs: &Revisions,
    outcome: &Outcome,
    now: &Time,
) {
    // Upstream `setUpdatedCondition`: only a change of status is written.
    let updated = revs.current == revs.update;
    let unchanged = st
        .conditions
        .iter()
        .any(|c| c.type_ == UD_CONDITION_UPDATED && (c.status == "True") == updated);
    if !unchanged {
        let (reason, verb) = if updated {
            ("UnitedDeploymentRevisionUpdated", "updated")
        } else {
            ("UnitedDeploymentRevisionUpdating", "updating")
        };
        let msg = format!("{verb} to revision {}", revs.update);
        condition::set(
            &mut st.conditions,
            new_condition(UD_CONDITION_UPDATED, updated, reason, msg, now),
        );
    }
    let provisioned = match &outcome.provision_error {
        Some(e) => Some(new_condition(
            UD_CONDITION_SUBSET_PROVISIONED,
            false,
            "Error",
            e.clone(),
            now,
        )),
        None if outcome.provisioned => Some(new_condition(
            UD_CONDITION_SUBSET_PROVISIONED,
            true,
            "",
            String::new(),
            now,
        )),
        None => None,
    };
    if let Some(c) = provisioned {
        condition::set(&mut st.conditions, c);
    }
    let upd = match &outcome.update_error {
        Some(e) => new_condition(UD_CONDITION_SUBSET_UPDATED, false, "Error", e.clone(), now),
        None => new_condition(UD_CONDITION_SUBSET_UPDATED, true, "", String::new(), now),
    };
    condition::set(&mut st.conditions, upd);
    // No subset workload kind reports a failure (upstream's adapters all return none).
    condition::remove(&mut st.conditions, UD_CONDITION_SUBSET_FAILURE);
}

/// The next status of `ud`.
pub fn next_status(
    ud: &UnitedDeployment,
    revs: &Revisions,
    kept: &BTreeMap<String, Observed>,
    next_replicas: &BTreeMap<String, i32>,
    next_partitions: &BTreeMap<String, i32>,
    outcome: &Outcome,
    now: &Time,
) -> UnitedDeploymentStatus {
    let mut st = ud.status.clone().unwrap_or_default();
    set_conditions(&mut st, revs, outcome, now);
    let reserved = |subset: &str| {
        outcome
            .reserved_pods
            .as_ref()
            .and_then(|m| m.get(subset))
            .copied()
            .unwrap_or(0)
    };
    st.replicas = kept
        .values()
        .map(|o| o.replicas - reserved(&o.subset))
        .sum();
    st.ready_replicas = kept.values().map(|o| o.ready_replicas).sum();
    st.updated_replicas = kept.values().map(|o| o.updated_replicas).sum();
    st.updated_ready_replicas = kept.values().map(|o| o.updated_ready_replicas).sum();
    st.reserved_pods = kept.values().map(|o| reserved(&o.subset)).sum();
    st.subset_statuses = ud
        .spec
        .topology
        .subsets
        .iter()
        .map(|s| {
            let prev = st.subset_statuses.iter().find(|p| p.name == s.name);
            let o = kept.get(&s.name);
            UnitedDeploymentSubsetStatus {
                name: s.name.clone(),
                replicas: o.map_or(0, |o| o.replicas),
                ready_replicas: o.map_or(0, |o| o.ready_replicas),
                partition: next_partitions.get(&s.name).copied().unwrap_or(0),
                reserved_pods: o.map_or(0, |o| reserved(&o.subset)),
                conditions: outcome
                    .subset_conditions
                    .get(&s.name)
                    .or(prev.map(|p| &p.conditions))
                    .cloned()
                    .unwrap_or_default(),
            }
        })
        .collect();
    st.subset_replicas = next_replicas.clone();
    if st.current_revision.is_empty() {
        st.current_revision = revs.current.clone();
    }
    st.update_status = Some(UpdateStatus {
        updated_revision: revs.update.clone(),
        current_partitions: next_partitions.clone(),
    });
    if revs.update != st.current_revision && st.updated_ready_replicas >= st.replicas {
        st.current_revision = revs.update.clone();
    }
    st.collision_count =
        (revs.collision_count != 0 || st.collision_count.is_some()).then_some(revs.collision_count);
    st.label_selector = ud
        .spec
        .selector
        .as_ref()
        .and_then(kruise_api::selector::to_selector_string)
        .unwrap_or_default();
    // Upstream: scaling (an HPA) sees only the Pods that are not reserved.
    if outcome.reserved_pods.is_some() {
        st.label_selector = format!("{},{UD_RESERVED_POD_LABEL}=false", st.label_selector);
    }
    st.observed_generation = ud.metadata.generation.unwrap_or_default();
    st
}
