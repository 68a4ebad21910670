//! PersistentPodState validation (upstream `PersistentPodStateCreateUpdateHandler`): the
//! target is a StatefulSet (apps/v1 or Advanced) or a kind listed in the `kruise-configuration`
//! key `PPS_Watch_Custom_Workload_WhiteList`, at least one topology is set, `targetRef`
//! never changes, and no two PersistentPodStates of a namespace target one workload. Kruise-rs
//! also refuses what would break later, when a recreated Pod is given its recorded topology: a
//! weight outside 1-100, an empty or malformed key, an unknown retention policy (see
//! docs/kinds/persistentpodstate.md). Refusals are 400s, as upstream's `admission.Errored`.

use kruise_api::apps::v1alpha1::{NodeTopologyTerm, PersistentPodState, PpsWorkloadWhiteList};
use kruise_api::keys;
use serde_json::{Value, json};

use super::PpsLookup;
use crate::field::{FieldError, aggregate, dns_subdomain_problem};
use crate::review::{Outcome, Request, decoded_with_old};

/// `/validate-apps-kruise-io-persistentpodstate` (CREATE and UPDATE).
pub async fn validate<C: PpsLookup>(req: Request, cluster: &C) -> Outcome {
    let (pps, old) = match decoded_with_old::<PersistentPodState>(&req, "PersistentPodState") {
        Ok(Some(both)) => both,
        Ok(None) => return Outcome::Allow,
        Err(o) => return o,
    };
    let target = &pps.spec.target_reference;
    // The ConfigMap is read only for a kind that is not a StatefulSet.
    let whitelist = if target.kind.is_empty() || is_statefulset(&target.api_version, &target.kind) {
        PpsWorkloadWhiteList::default()
    } else {
        match cluster.pps_whitelist().await {
            Ok(w) => w,
            Err(e) => {
                return Outcome::bad_request(format!(
                    "cannot read the custom workload whitelist of PersistentPodState: {e}"
                ));
            }
        }
    };
    let mut errs = spec_errors_with(&pps, &whitelist);
    if let Some(old) = &old {
        errs.extend(update_errors(&pps, old));
    }
    let ns = pps
        .metadata
        .namespace
        .clone()
        .or_else(|| req.namespace.clone())
        .unwrap_or_default();
    match cluster.persistent_pod_states_live(&ns).await {
        Ok(others) => errs.extend(conflict_errors(&pps, &others)),
        Err(e) => errs.push(FieldError::reported(
            "metadata.namespace",
            format!("Internal error: query other PersistentPodState failed, err: {e}"),
        )),
    }
    if errs.is_empty() {
        Outcome::Allow
    } else {
        Outcome::bad_request(aggregate(&errs))
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Whether `api_version`/`kind` is a StatefulSet a PersistentPodState may target.
pub fn is_statefulset(api_version: &str, kind: &str) -> bool {
    kruise_api::apps::v1alpha1::is_pps_builtin_target(api_version, kind)
}

/// Every problem of one PersistentPodState on its own, without a custom workload whitelist.
pub fn spec_errors(pps: &PersistentPodState) -> Vec<FieldError> {
    spec_errors_with(pps, &PpsWorkloadWhiteList::default())
}

/// Every problem of one PersistentPodState on its own; `whitelist` lists the custom kinds
/// (`PPS_Watch_Custom_Workload_WhiteList`) it may target beside StatefulSets.
pub fn spec_errors_with(
    pps: &PersistentPodState,
    whitelist: &PpsWorkloadWhiteList,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &pps.spec;
    let r = &spec.target_reference;
    if r.api_version.is_empty() || r.kind.is_empty() || r.name.is_empty() {
        errs.push(FieldError::invalid(
            "spec.targetRef",
            &to_json(r),
            "empty TargetReference is not valid for PersistentPodState: set apiVersion, kind and name",
        ));
    } else if !whitelist.allows(&r.api_version, &r.kind) {
        errs.push(FieldError::invalid(
            "spec.targetRef",
            &to_json(r),
            "TargetReference.Kind must be StatefulSet or in PPS_Watch_Custom_Workload_WhiteList: use apiVersion apps/v1 or apps.kruise.io/v1beta1 with kind StatefulSet, or list the kind in that key of ConfigMap kruise-configuration",
        ));
    }
    if spec.required_persistent_topology.is_none() && spec.preferred_persistent_topology.is_empty()
    {
        errs.push(FieldError::required(
            "spec.requiredPersistentTopology, spec.preferredPersistentTopology",
            "TopologyConstraint and TopologyPreference cannot be empty at the same time: set requiredPersistentTopology or preferredPersistentTopology",
        ));
    }
    if let Some(term) = &spec.required_persistent_topology {
        errs.extend(term_errors(term, "spec.requiredPersistentTopology"));
    }
    for (i, term) in spec.preferred_persistent_topology.iter().enumerate() {
        let path = format!("spec.preferredPersistentTopology[{i}]");
        if !(1..=100).contains(&term.weight) {
            errs.push(FieldError::invalid(
                format!("{path}.weight"),
                &json!(term.weight),
                "must be in the range 1-100, as a preferred scheduling term's weight",
            ));
        }
        errs.extend(term_errors(&term.preference, &format!("{path}.preference")));
    }
    for (i, a) in spec.persistent_pod_annotations.iter().enumerate() {
        if let Some(problem) = key_problem(&a.key) {
            errs.push(FieldError::invalid(
                format!("spec.persistentPodAnnotations[{i}].key"),
                &json!(a.key),
                problem,
            ));
        }
    }
    if let Some(policy) = &spec.persistent_pod_state_retention_policy {
        let allowed = [
            keys::PPS_RETENTION_WHEN_SCALED,
            keys::PPS_RETENTION_WHEN_DELETED,
        ];
        if !allowed.contains(&policy.as_str()) {
            errs.push(FieldError::not_supported(
                "spec.persistentPodStateRetentionPolicy",
                &json!(policy),
                &allowed,
            ));
        }
    }
    errs
}

fn term_errors(term: &NodeTopologyTerm, path: &str) -> Vec<FieldError> {
    let path = format!("{path}.nodeTopologyKeys");
    if term.node_topology_keys.is_empty() {
        return vec![FieldError::required(
            path,
            "list at least one node label key, e.g. kubernetes.io/hostname",
        )];
    }
    term.node_topology_keys
        .iter()
        .enumerate()
        .filter_map(|(i, k)| {
            key_problem(k).map(|p| FieldError::invalid(format!("{path}[{i}]"), &json!(k), p))
        })
        .collect()
}

/// Why `key` is not a label or annotation key (`[prefix/]name`, name at most 63 alphanumerics,
/// `-`, `_`, `.`, beginning and ending alphanumeric; prefix a DNS subdomain).
fn key_problem(key: &str) -> Option<&'static str> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && (p.is_empty() || dns_subdomain_problem(p).is_some())
    {
        return Some("the prefix before '/' must be a DNS subdomain, e.g. example.com/name");
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if name.is_empty()
        || name.len() > 63
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        || !alnum(name.chars().next())
        || !alnum(name.chars().last())
    {
        return Some(
            "must be a qualified name: at most 63 alphanumerics, '-', '_' or '.', beginning and ending with an alphanumeric, with an optional DNS subdomain prefix and '/'",
        );
    }
    None
}

/// `spec.targetRef` never changes (upstream `validateUpdateObjImmutable`).
pub fn update_errors(pps: &PersistentPodState, old: &PersistentPodState) -> Vec<FieldError> {
    if pps.spec.target_reference == old.spec.target_reference {
        return Vec::new();
    }
    vec![FieldError::forbidden(
        "spec.targetRef",
        "targetRef cannot be modified: create another PersistentPodState for another workload",
    )]
}

/// No other PersistentPodState of the namespace targets the same workload (upstream
/// `validatePerConflict`: same group, kind and name).
pub fn conflict_errors(pps: &PersistentPodState, others: &[PersistentPodState]) -> Vec<FieldError> {
    let target = &pps.spec.target_reference;
    others
        .iter()
        .filter(|o| o.metadata.name != pps.metadata.name)
        .find(|o| o.spec.target_reference.same_workload(target))
        .map(|o| {
            FieldError::invalid(
                "spec.targetRef",
                &to_json(target),
                format!(
                    "targetReference is in conflict with other PersistentPodState {}: one workload has at most one",
                    o.metadata.name.as_deref().unwrap_or_default()
                ),
            )
        })
        .into_iter()
        .collect()
}
