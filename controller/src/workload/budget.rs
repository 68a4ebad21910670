//! A workload's own charge of a PodUnavailableBudget before it updates a Pod (upstream's
//! `pubcontrol.PodUnavailableBudgetValidatePod(pod, UPDATE, "kruise-manager", false)` in the
//! CloneSet update loop, under `PodUnavailableBudgetUpdateGate`). An allowed update is
//! recorded in the budget's `unavailablePods`, so the Pod webhook then lets the update through
//! without a second charge; a refused one leaves the Pod waiting, with upstream's Event.

use crate::events::Recorder;
use crate::stored::StatusError;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_api::policy::v1alpha1::pubcontrol::{
    charge, is_exempt, needs_charge, related_budget_name,
};
use kruise_api::policy::v1alpha1::{PodUnavailableBudget, PubOperation};
use kruise_webhook::metrics::ProtectionMetrics;
use kube::Api;
use kube::runtime::events::EventType;
use kube::{Client, Resource};

/// The requester the refusal counter names for the manager's own charges, as upstream.
const MANAGER_USERNAME: &str = "kruise-manager";

/// Attempts against concurrent status writes (upstream's `ConflictRetry` steps).
const ATTEMPTS: usize = 4;

/// Whether the Pod may be updated now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Not covered, not counted, or charged to its budget.
    Allowed,
    /// The budget allows no more unavailable Pods: why, in upstream's words.
    Refused(String),
}

/// Charges the update of `pod` to the budget it names (see the module docs).
pub async fn charge_update(
    client: &Client,
    recorder: &Recorder,
    metrics: &ProtectionMetrics,
    pod: &Pod,
    inplace_vertical_scaling: bool,
) -> Result<Verdict, kube::Error> {
    if is_exempt(pod) {
        return Ok(Verdict::Allowed);
    }
    let (Some(name), Some(ns)) = (related_budget_name(pod), pod.metadata.namespace.as_deref())
    else {
        return Ok(Verdict::Allowed);
    };
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let api: Api<PodUnavailableBudget> = Api::namespaced(client.clone(), ns);
    let op = PubOperation::Update;
    for _ in 0..ATTEMPTS {
        let Some(mut budget) = api.get_opt(name).await? else {
            return Ok(Verdict::Allowed);
        };
        if !needs_charge(&budget, &pod_name, op, inplace_vertical_scaling) {
            return Ok(Verdict::Allowed);
        }
        if let Err(refused) = charge(&mut budget, &pod_name, op, Timestamp::now()) {
            metrics.budget_refused(pod, MANAGER_USERNAME);
            crate::events::publish(
                recorder,
                &pod.object_ref(&()),
                EventType::Warning,
                keys::PUB_REASON_PREVENT_POD_DELETION,
                keys::PUB_PREVENT_POD_DELETION_NOTE.to_owned(),
            )
            .await;
            return Ok(Verdict::Refused(refused.to_string()));
        }
        // At the storage version (no conversion webhook call).
        match crate::stored::replace_status(client, &budget).await {
            Ok(_) => return Ok(Verdict::Allowed),
            Err(StatusError::Kube(kube::Error::Api(s))) if s.code == 404 => {
                return Ok(Verdict::Allowed);
            }
            Err(StatusError::Kube(e)) if crate::runner::is_conflict(&e) => continue,
            Err(StatusError::Kube(e)) => return Err(e),
            Err(e) => return Err(kube::Error::Service(Box::new(e))),
        }
    }
    Ok(Verdict::Refused(format!(
        "Timeout: couldn't update PodUnavailableBudget {name} due to conflicts"
    )))
}
