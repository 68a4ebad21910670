//! The pure decisions of a UnitedDeployment reconcile: how many replicas each subset gets
//! (upstream `allocator.go`: the specific allocator and the elastic min/max one), the partition
//! passed to each subset (`calcNextPartitions`), which subset workloads to create, update or
//! delete (`manageSubsetProvision`, `manageSubsets`) and which revisions to prune
//! (`cleanExpiredRevision`). No API calls.

use std::collections::{BTreeMap, BTreeSet};

use kruise_api::apps::v1alpha1::{
    Subset, UD_UPDATE_MANUAL, UnitedDeploymentSpec, parse_subset_replicas,
};

/// Why the replicas cannot be split (the controller records it and backs off).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    #[error(
        "specified subsets' replica ({specified}) is greater than UnitedDeployment replica ({replicas})"
    )]
    Greater { specified: i32, replicas: i32 },
    #[error(
        "specified subsets' replica ({specified}) is less than UnitedDeployment replica ({replicas})"
    )]
    Less { specified: i32, replicas: i32 },
    #[error("all subsets must be specified when UnitedDeployment replica is unspecified")]
    Unspecified,
    #[error("subset[{index}].maxReplicas({max}) must be more than or equal to minReplicas({min})")]
    MinOverMax { index: usize, max: i32, min: i32 },
}

/// Replicas per subset name for the next state. `current` holds the `spec.replicas` of the
/// subsets' existing workloads (upstream sorts the subsets by them before sharing the rest).
pub fn allocate(
    spec: &UnitedDeploymentSpec,
    current: &BTreeMap<String, i32>,
) -> Result<BTreeMap<String, i32>, AllocError> {
    let elastic = spec
        .topology
        .subsets
        .iter()
        .any(|s| s.min_replicas.is_some() || s.max_replicas.is_some());
    if elastic {
        min_max_allocate(spec)
    } else {
        specific_allocate(spec, current)
    }
}

/// Upstream `specificAllocator`: subsets with `replicas` get it; the rest of the total is
/// shared evenly by the others, the remainder going one each to the subsets that already run
/// the most (ties broken by name, the later name first).
fn specific_allocate(
    spec: &UnitedDeploymentSpec,
    current: &BTreeMap<String, i32>,
) -> Result<BTreeMap<String, i32>, AllocError> {
    let total = spec.replicas.unwrap_or(-1);
    let mut specified: BTreeMap<&str, i32> = BTreeMap::new();
    for s in &spec.topology.subsets {
        // A malformed value is left unspecified, as upstream logs and skips it.
        if let Some(r) = s.replicas.as_ref()
            && let Ok(n) = parse_subset_replicas(total, r)
        {
            specified.insert(&s.name, n);
        }
    }
    let sum: i32 = specified.values().sum();
    let n = spec.topology.subsets.len();
    if total != -1 {
        if sum > total {
            return Err(AllocError::Greater {
                specified: sum,
                replicas: total,
            });
        }
        if sum < total && specified.len() == n {
            return Err(AllocError::Less {
                specified: sum,
                replicas: total,
            });
        }
    } else if specified.len() != n {
        return Err(AllocError::Unspecified);
    }
    let mut order: Vec<(i32, &str)> = spec
        .topology
        .subsets
        .iter()
        .map(|s| (current.get(&s.name).copied().unwrap_or(0), s.name.as_str()))
        .collect();
    order.sort();
    let mut out: BTreeMap<String, i32> = BTreeMap::new();
    let left = n - specified.len();
    let mut remainder = 0;
    let mut average = 0;
    if left > 0 {
        let rest = total - sum;
        // `left` is at most the subsets' count.
        let left_i = left as i32;
        average = rest / left_i;
        remainder = rest % left_i;
    }
    for (_, name) in order.iter().rev() {
        let v = match specified.get(name) {
            Some(v) => *v,
            None if remainder > 0 => {
                remainder -= 1;
                average + 1
            }
            None => average,
        };
        out.insert((*name).to_owned(), v);
    }
    Ok(out)
}

/// `(min, max)` of every subset against the total (`0` and `i32::MAX` when unset).
pub(super) fn min_max_of(spec: &UnitedDeploymentSpec) -> Result<Vec<(i32, i32)>, AllocError> {
    let total = spec.replicas.unwrap_or(0);
    let mut out = Vec::with_capacity(spec.topology.subsets.len());
    for (index, s) in spec.topology.subsets.iter().enumerate() {
        let min = s
            .min_replicas
            .as_ref()
            .and_then(|v| parse_subset_replicas(total, v).ok())
            .unwrap_or(0);
        let max = s
            .max_replicas
            .as_ref()
            .and_then(|v| parse_subset_replicas(total, v).ok())
            .unwrap_or(i32::MAX);
        if min > max {
            return Err(AllocError::MinOverMax { index, max, min });
        }
        out.push((min, max));
    }
    Ok(out)
}

/// Upstream `minMaxAllocator`.
fn min_max_allocate(spec: &UnitedDeploymentSpec) -> Result<BTreeMap<String, i32>, AllocError> {
    let bounds = min_max_of(spec)?;
    Ok(fill_by_bounds(
        spec.replicas.unwrap_or(0),
        &spec.topology.subsets,
        &bounds,
    ))
}

/// Upstream `allocateByMinMaxMap`: in the subsets' order, first every subset's minimum while
/// replicas are left, then every subset up to its maximum (`bounds` follow `subsets`).
pub(super) fn fill_by_bounds(
    total: i32,
    subsets: &[Subset],
    bounds: &[(i32, i32)],
) -> BTreeMap<String, i32> {
    let mut out: BTreeMap<String, i32> = BTreeMap::new();
    let mut allocated = 0i32;
    for (s, (min, _)) in subsets.iter().zip(bounds) {
        let add = (*min).min(total - allocated).max(0);
        out.insert(s.name.clone(), add);
        allocated += add;
    }
    if allocated >= total {
        return out;
    }
    for (s, (min, max)) in subsets.iter().zip(bounds) {
        let add = max.saturating_sub(*min).min(total - allocated).max(0);
        *out.entry(s.name.clone()).or_default() += add;
        allocated += add;
    }
    out
}

/// Upstream `calcNextPartitions`: the Manual partition of each subset, at most its replicas.
pub fn next_partitions(
    spec: &UnitedDeploymentSpec,
    next_replicas: &BTreeMap<String, i32>,
) -> BTreeMap<String, i32> {
    let manual = spec
        .update_strategy
        .manual_update
        .as_ref()
        .filter(|_| spec.update_strategy.type_ == UD_UPDATE_MANUAL);
    spec.topology
        .subsets
        .iter()
        .map(|s| {
            let mut p = manual
                .and_then(|m| m.partitions.get(&s.name))
                .copied()
                .unwrap_or(0);
            if let Some(r) = next_replicas.get(&s.name)
                && p > *r
            {
                p = *r;
            }
            (s.name.clone(), p)
        })
        .collect()
}

/// One subset workload as the reconcile read it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// Object name.
    pub name: String,
    /// The `apps.kruise.io/subset-name` label.
    pub subset: String,
    pub spec_replicas: i32,
    pub spec_partition: i32,
    /// The `apps.kruise.io/controller-revision-hash` label.
    pub revision: String,
    /// The `apps.kruise.io/subset-patch` annotation.
    pub patch: String,
    pub replicas: i32,
    pub ready_replicas: i32,
    /// Active Pods labelled with the update revision.
    pub updated_replicas: i32,
    pub updated_ready_replicas: i32,
}

/// What to do with the subsets' workloads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Create the workload of this subset.
    Create(String),
    /// Rewrite the workload `name` of subset `subset`.
    Update { subset: String, name: String },
    /// Delete the workload `name` (a removed subset, a duplicate, or of another kind).
    Delete(String),
}

/// The desired values of one subset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    pub replicas: i32,
    pub partition: i32,
    /// The subset's patch as the annotation records it (`""` when none).
    pub patch: String,
    /// Overwrites the workload's `maxUnavailable` when it is updated (an unschedulable subset
    /// reserving its Pods).
    pub max_unavailable: Option<i32>,
}

/// Upstream `manageSubsetProvision` + `manageSubsets`: one workload per subset. The first
/// workload of each subset (by the order given) is kept and the others deleted; workloads of
/// subsets no longer in the spec are deleted; missing ones are created; an existing one is
/// rewritten when its revision, replicas, partition or patch differ from the desired ones.
pub fn steps(
    subsets: &[String],
    existing: &[Observed],
    revision: &str,
    desired: &BTreeMap<String, Desired>,
) -> (Vec<Step>, BTreeMap<String, Observed>) {
    let wanted: BTreeSet<&str> = subsets.iter().map(String::as_str).collect();
    let mut kept: BTreeMap<String, Observed> = BTreeMap::new();
    let mut out = Vec::new();
    for o in existing {
        if !wanted.contains(o.subset.as_str()) || kept.contains_key(&o.subset) {
            out.push(Step::Delete(o.name.clone()));
        } else {
            kept.insert(o.subset.clone(), o.clone());
        }
    }
    for name in subsets {
        let Some(want) = desired.get(name) else {
            continue;
        };
        match kept.get(name) {
            None => out.push(Step::Create(name.clone())),
            Some(o) => {
                if o.revision != revision
                    || o.spec_replicas != want.replicas
                    || o.spec_partition != want.partition
                    || o.patch != want.patch
                {
                    out.push(Step::Update {
                        subset: name.clone(),
                        name: o.name.clone(),
                    });
                }
            }
        }
    }
    (out, kept)
}

/// Upstream `cleanExpiredRevision`: with more revisions (sorted oldest first) than the limit,
/// the oldest ones past it are deleted, unless live (the current or the updated revision).
pub fn revisions_to_prune(sorted: &[String], live: &[&str], limit: i32) -> Vec<String> {
    let limit = usize::try_from(limit.max(0)).unwrap_or(0);
    let exceed = sorted.len().saturating_sub(limit);
    sorted
        .iter()
        .take(exceed)
        .filter(|n| !live.contains(&n.as_str()))
        .cloned()
        .collect()
}
