//! The conflict-safe status write (upstream `RetryOnConflict` around `updatePubStatus`): the
//! status is recomputed from the freshest copy of the budget, so an entry the webhook charged
//! in between is kept, never overwritten.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::policy::v1alpha1::PodUnavailableBudget;
use kube::Api;

use super::context::Context;
use super::error::Error;
use super::plan::{StatusPlan, plan_status};
use crate::stored::{self, StatusError};

/// Attempts before giving up to the runner's backoff (upstream's `ConflictRetry` steps).
const ATTEMPTS: usize = 4;

/// Writes the status of `budget` if it changed; the plan that was written (or found current).
pub async fn write(
    ctx: &Context,
    budget: &PodUnavailableBudget,
    pods: &[Arc<Pod>],
    expected: i32,
    desired: i32,
) -> Result<Option<StatusPlan>, Error> {
    let ns = budget.metadata.namespace.clone().unwrap_or_default();
    let name = budget.metadata.name.clone().unwrap_or_default();
    let api: Api<PodUnavailableBudget> = Api::namespaced(ctx.client.clone(), &ns);
    let mut current = budget.clone();
    for attempt in 1..=ATTEMPTS {
        let plan = plan_status(&current, pods, expected, desired, Timestamp::now());
        if !plan.changed {
            return Ok(Some(plan));
        }
        let mut next = current.clone();
        next.status = Some(plan.status.clone());
        // At the storage version (no conversion webhook call).
        match stored::replace_status(&ctx.client, &next).await {
            Ok(_) => return Ok(Some(plan)),
            Err(StatusError::Kube(kube::Error::Api(s))) if s.code == 404 => return Ok(None),
            Err(StatusError::Kube(e)) if crate::runner::is_conflict(&e) && attempt < ATTEMPTS => {
                tracing::debug!(attempt, "status write conflicted; reading the budget again");
                match api.get_opt(&name).await? {
                    Some(fresh) => current = fresh,
                    None => return Ok(None),
                }
            }
            Err(StatusError::Kube(e)) => return Err(e.into()),
            Err(e) => return Err(Error::Stored(e)),
        }
    }
    Ok(None)
}
