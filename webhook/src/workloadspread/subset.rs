//! Which subset a new Pod takes, and how the WorkloadSpread's status records creates and
//! deletes (upstream `pkg/util/workloadspread/workloadspread.go`: `updateSubsetForPod`,
//! `getSuitableSubset`, `injectWorkloadSpreadIntoPod`). Pure: the caller reads the object,
//! calls these, and writes the status with conflict retries.

use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, NodeSelector, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1alpha1::{
    MatchedWorkloadSpread, WorkloadSpread, WorkloadSpreadSubset, WorkloadSpreadSubsetStatus,
};
use kruise_api::keys;
use serde_json::Value;

/// Why no reservation could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReserveError {
    /// The controller has not written the subsets' statuses yet and a cap is a percentage,
    /// which needs the workload's replicas: the workload's controller retries the create.
    #[error(
        "WorkloadSpread {0} has no status for its subsets yet; the Pod is refused until the controller writes it"
    )]
    NotReady(String),
}

/// What a Pod create did to the status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// A subset was reserved: the status changed and must be written.
    Reserved(MatchedWorkloadSpread),
    /// Nothing to write: the Pod's name is already recorded (a retried create), or the subset
    /// has no cap.
    Recorded(MatchedWorkloadSpread),
    /// Every subset is full or closed: the Pod is created without a subset, as upstream.
    NoSubset,
}

/// Whether reserving for a Pod of `version` needs the workload's replicas: a subset of the
/// spec has no status for that version yet and its cap is a percentage.
pub fn needs_replicas(ws: &WorkloadSpread, version: &str) -> bool {
    let have = ws.status.as_ref().map_or(&[][..], |s| s.versioned(version));
    ws.spec.subsets.iter().any(|s| {
        matches!(s.max_replicas, Some(IntOrString::String(_)))
            && !have.iter().any(|h| h.name == s.name)
    })
}

/// The statuses of `version`, one per subset of the spec in its order (upstream
/// `initializedSubsetStatuses` for a version seen first): a subset without one starts with its
/// whole cap missing (`-1` when it has none), a percentage scaled against `replicas`.
fn ensure_statuses<'a>(
    ws: &'a mut WorkloadSpread,
    version: &str,
    replicas: Option<i32>,
) -> Result<&'a mut Vec<WorkloadSpreadSubsetStatus>, ReserveError> {
    let ws_name = ws.metadata.name.clone().unwrap_or_default();
    let status = ws.status.get_or_insert_with(Default::default);
    let have = status
        .versioned_subset_statuses
        .entry(version.to_owned())
        .or_default();
    let in_order = have.len() == ws.spec.subsets.len()
        && have
            .iter()
            .zip(&ws.spec.subsets)
            .all(|(h, s)| h.name == s.name);
    if !in_order {
        let mut fresh = Vec::with_capacity(ws.spec.subsets.len());
        for s in &ws.spec.subsets {
            if let Some(old) = have.iter().find(|o| o.name == s.name) {
                fresh.push(old.clone());
                continue;
            }
            let missing = match (&s.max_replicas, replicas) {
                (None, _) => -1,
                (Some(IntOrString::Int(n)), _) => *n,
                (Some(_), Some(r)) => s.max_replicas_of(r).unwrap_or(0),
                // Refused: the workload's controller retries the create.
                (Some(_), None) => return Err(ReserveError::NotReady(ws_name)),
            };
            fresh.push(WorkloadSpreadSubsetStatus {
                name: s.name.clone(),
                missing_replicas: missing,
                ..Default::default()
            });
        }
        *have = fresh;
    }
    Ok(have)
}

fn recorded_in(statuses: &[WorkloadSpreadSubsetStatus], pod_name: &str) -> Option<String> {
    statuses.iter().find_map(|s| {
        (s.creating_pods.contains_key(pod_name) || s.deleting_pods.contains_key(pod_name))
            .then(|| s.name.clone())
    })
}

/// Whether `ws` targets a StatefulSet (apps/v1 or Advanced), whose Pods go by ordinal.
pub fn targets_statefulset(ws: &WorkloadSpread) -> bool {
    ws.spec
        .target_reference
        .as_ref()
        .is_some_and(|t| t.kind == "StatefulSet")
}

/// The ordinal at the end of a StatefulSet Pod's name (`web-3` → 3), `-1` when there is none
/// (upstream `getParentNameAndOrdinal`).
fn ordinal(pod_name: &str) -> i64 {
    match pod_name.rsplit_once('-') {
        Some((parent, n))
            if !parent.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            n.parse::<i32>().map_or(-1, i64::from)
        }
        _ => -1,
    }
}

/// Upstream's StatefulSet rule (`acquireSuitableSubset`): a StatefulSet's Pods are placed by
/// ordinal, not by reservation — the first `maxReplicas` ordinals in the first subset, the next
/// ones in the next, the rest in an uncapped one; a subset closed by `Schedulable=False` is
/// passed over. Nothing is written to the status. `None` when the ordinal is past every cap.
pub fn by_ordinal(ws: &WorkloadSpread, pod_name: &str) -> Option<MatchedWorkloadSpread> {
    let closed = |name: &str| {
        ws.status.as_ref().is_some_and(|st| {
            st.subset_statuses
                .iter()
                .any(|s| s.name == name && s.unschedulable())
        })
    };
    let ord = ordinal(pod_name);
    let mut threshold: i64 = 0;
    for subset in &ws.spec.subsets {
        if closed(&subset.name) {
            continue;
        }
        // Go's `IntOrString.IntValue`: a string that is not a number counts 0.
        threshold += match &subset.max_replicas {
            None => i64::from(i32::MAX),
            Some(IntOrString::Int(n)) => i64::from(*n),
            Some(IntOrString::String(s)) => s.parse::<i64>().unwrap_or(0),
        };
        if ord < threshold {
            return Some(MatchedWorkloadSpread {
                name: ws.metadata.name.clone().unwrap_or_default(),
                subset: subset.name.clone(),
                uid: String::new(),
            });
        }
    }
    None
}

/// Upstream `getSuitableSubset`: the first subset, in order, that is not closed by a
/// `Schedulable=False` condition and still misses Pods (or has no cap).
pub fn suitable(statuses: &[WorkloadSpreadSubsetStatus]) -> Option<usize> {
    statuses
        .iter()
        .position(|s| !s.unschedulable() && (s.missing_replicas > 0 || s.missing_replicas == -1))
}

/// Upstream `updateSubsetForPod` for a create: picks the subset from the statuses of the
/// Pod's `version` and records the Pod in its `creatingPods` (under its name, or
/// `generated_uid` when it has none yet), taking one from `missingReplicas`. `replicas` is
/// the workload's, needed only when [`needs_replicas`] says so.
pub fn reserve_create(
    ws: &mut WorkloadSpread,
    version: &str,
    pod_name: Option<&str>,
    replicas: Option<i32>,
    generated_uid: impl FnOnce() -> String,
    now: Time,
) -> Result<Created, ReserveError> {
    let ws_name = ws.metadata.name.clone().unwrap_or_default();
    let statuses = ensure_statuses(ws, version, replicas)?;
    if let Some(name) = pod_name
        && let Some(subset) = recorded_in(statuses, name)
    {
        return Ok(Created::Recorded(MatchedWorkloadSpread {
            name: ws_name,
            subset,
            uid: String::new(),
        }));
    }
    let Some(i) = suitable(statuses) else {
        return Ok(Created::NoSubset);
    };
    let subset = &mut statuses[i];
    if subset.missing_replicas == -1 {
        // No cap, nothing to reserve: upstream writes no status for it.
        return Ok(Created::Recorded(MatchedWorkloadSpread {
            name: ws_name,
            subset: subset.name.clone(),
            uid: String::new(),
        }));
    }
    let (key, uid) = match pod_name {
        Some(n) => (n.to_owned(), String::new()),
        None => {
            let uid = generated_uid();
            (uid.clone(), uid)
        }
    };
    subset.creating_pods.insert(key, now);
    if subset.missing_replicas > 0 {
        subset.missing_replicas -= 1;
    }
    Ok(Created::Reserved(MatchedWorkloadSpread {
        name: ws_name,
        subset: subset.name.clone(),
        uid,
    }))
}

/// Upstream `updateSubsetForPod` for a delete or eviction: records the Pod in its subset's
/// `deletingPods` among the statuses of its `version`, giving one back to `missingReplicas`.
/// Whether the status changed.
pub fn record_delete(
    ws: &mut WorkloadSpread,
    version: &str,
    pod_name: &str,
    subset: &str,
    replicas: Option<i32>,
    now: Time,
) -> Result<bool, ReserveError> {
    let statuses = ensure_statuses(ws, version, replicas)?;
    if recorded_in(statuses, pod_name).is_some() {
        return Ok(false);
    }
    let Some(s) = statuses.iter_mut().find(|s| s.name == subset) else {
        return Ok(false);
    };
    if s.missing_replicas == -1 {
        return Ok(false);
    }
    s.deleting_pods.insert(pod_name.to_owned(), now);
    s.missing_replicas += 1;
    Ok(true)
}

/// Upstream `injectWorkloadSpreadIntoPod`: the subset's tolerations, preferred and required
/// node affinity (the required term is added to every term the Pod already has), its patch,
/// and the annotation naming the choice.
pub fn inject(
    pod: &mut Pod,
    subset: &WorkloadSpreadSubset,
    matched: &MatchedWorkloadSpread,
) -> Result<(), serde_json::Error> {
    let spec = pod.spec.get_or_insert_with(Default::default);
    if !subset.tolerations.is_empty() {
        spec.tolerations
            .get_or_insert_with(Vec::new)
            .extend(subset.tolerations.iter().cloned());
    }
    let na = spec
        .affinity
        .get_or_insert_with(Affinity::default)
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    if !subset.preferred_node_selector_terms.is_empty() {
        na.preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .extend(subset.preferred_node_selector_terms.iter().cloned());
    }
    if let Some(req) = &subset.required_node_selector_term {
        let sel = na
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(NodeSelector::default);
        if sel.node_selector_terms.is_empty() {
            sel.node_selector_terms.push(req.clone());
        } else {
            for t in &mut sel.node_selector_terms {
                t.match_expressions
                    .get_or_insert_with(Vec::new)
                    .extend(req.match_expressions.iter().flatten().cloned());
                t.match_fields
                    .get_or_insert_with(Vec::new)
                    .extend(req.match_fields.iter().flatten().cloned());
            }
        }
    }
    if let Some(patch) = &subset.patch {
        let mut v = serde_json::to_value(&*pod)?;
        merge(&mut v, patch);
        *pod = serde_json::from_value(v)?;
    }
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            keys::MATCHED_WORKLOADSPREAD_ANNOTATION.to_owned(),
            matched.to_annotation(),
        );
    Ok(())
}

/// The part of a strategic merge patch a subset patch uses: objects merge key by key, `null`
/// removes a key, lists of objects that all carry a `name` (containers, env, volumes) merge by
/// name, other lists are replaced.
pub fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, pv) in p {
                if pv.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), pv);
                }
            }
        }
        (Value::Array(t), Value::Array(p)) if named(t) && named(p) => {
            for pv in p {
                let name = pv.get("name");
                match t.iter_mut().find(|tv| tv.get("name") == name) {
                    Some(tv) => merge(tv, pv),
                    None => t.push(pv.clone()),
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

fn named(items: &[Value]) -> bool {
    !items.is_empty()
        && items
            .iter()
            .all(|v| v.get("name").is_some_and(Value::is_string))
}
