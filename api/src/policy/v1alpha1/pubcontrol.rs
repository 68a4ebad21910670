//! The budget arithmetic of PodUnavailableBudget, shared by the Pod webhook (which charges
//! the budget) and the controller (which recomputes it): upstream `pkg/control/pubcontrol`
//! and the status part of `pkg/controller/podunavailablebudget`. Pure: time is a parameter.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{
    PodUnavailableBudget, PodUnavailableBudgetSpec, PodUnavailableBudgetStatus, PubOperation,
};
use crate::appspub::{InPlaceUpdateState, UpdateSpec};
use crate::keys::{self, k8s};

/// A `disruptedPods` entry is dropped this long after the admitted delete or eviction, if the
/// Pod is still there (upstream `DeletionTimeout`).
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(20);
/// An `unavailablePods` entry is dropped this long after the admitted update (upstream
/// `UpdatedDelayCheckTime`).
pub const UPDATE_DELAY_CHECK: Duration = Duration::from_secs(10);
/// More entries than this in `disruptedPods` + `unavailablePods` and the webhook refuses
/// (upstream `MaxUnavailablePodSize`).
pub const MAX_UNAVAILABLE_POD_SIZE: usize = 2000;

/// Whether the labels carry one with the `unavailable-pod.kruise.io/` prefix: the Pod counts as
/// unavailable even when Ready (upstream `HasUnavailableLabel`).
pub fn has_unavailable_label(labels: Option<&BTreeMap<String, String>>) -> bool {
    labels.is_some_and(|l| {
        l.keys()
            .any(|k| k.starts_with(keys::UNAVAILABLE_POD_LABEL_PREFIX))
    })
}

/// Not finished and not being deleted (Kubernetes' `IsPodActive`).
pub fn is_active(pod: &Pod) -> bool {
    let phase = phase(pod);
    phase != k8s::POD_SUCCEEDED
        && phase != k8s::POD_FAILED
        && pod.metadata.deletion_timestamp.is_none()
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Running, Ready, not being deleted and without the unavailable label (upstream
/// `IsPodReady` of pubcontrol).
pub fn is_pod_ready(pod: &Pod) -> bool {
    phase(pod) == k8s::POD_RUNNING
        && crate::pod::is_ready(pod)
        && pod.metadata.deletion_timestamp.is_none()
        && !has_unavailable_label(pod.metadata.labels.as_ref())
}

/// Whether the Pod runs what its spec says, i.e. is not mid in-place update (upstream
/// `IsPodStateConsistent`): no grace period pending, no launch-priority batch left, and every
/// container recorded before the update has restarted onto its new image. When every spec
/// image is a digest, the digests in `imageID` decide alone, as upstream.
pub fn is_pod_state_consistent(pod: &Pod) -> bool {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    let mut all_digest = !containers.is_empty();
    for c in containers {
        let image = c.image.as_deref().unwrap_or_default();
        let Some((_, digest)) = image.split_once('@') else {
            all_digest = false;
            continue;
        };
        let status_digest = statuses
            .iter()
            .find(|s| s.name == c.name)
            .and_then(|s| s.image_id.split_once('@').map(|(_, d)| d));
        if status_digest != Some(digest) {
            return false;
        }
    }
    if all_digest {
        return true;
    }
    if !sidecars_upgraded(pod) {
        return false;
    }
    let annotations = pod.metadata.annotations.as_ref();
    if !matches!(UpdateSpec::from_grace_annotation(annotations), Ok(None)) {
        return false;
    }
    let state = match InPlaceUpdateState::from_annotations(annotations) {
        Ok(Some(s)) => s,
        Ok(None) => return true,
        Err(_) => return false,
    };
    if !state.next_container_images.is_empty()
        || !state.next_container_ref_metadata.is_empty()
        || !state.next_container_resources.is_empty()
    {
        return false;
    }
    state.last_container_statuses.iter().all(|(name, old)| {
        let spec_image = containers
            .iter()
            .find(|c| &c.name == name)
            .and_then(|c| c.image.as_deref());
        statuses.iter().find(|s| &s.name == name).is_some_and(|s| {
            // An unchanged imageID means "not restarted yet" unless the status already shows
            // the spec's image (a new tag of the very same image keeps its ID).
            s.image_id != old.image_id || spec_image.is_some_and(|i| same_image(i, &s.image))
        })
    })
}

/// Whether every sidecar a SidecarSet upgraded in place has restarted (upstream
/// `IsSidecarContainerUpdateCompleted`, for the SidecarSets the Pod lists and its injected
/// containers): a recorded container whose imageID has not moved, while its status shows
/// another image than the spec's, is still to restart. Without this check a Pod whose sidecar
/// is being upgraded would count as available until the kubelet stopped the old container.
fn sidecars_upgraded(pod: &Pod) -> bool {
    let annotations = pod.metadata.annotations.as_ref();
    let Some(value) = annotations
        .and_then(|a| a.get(keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION))
        .filter(|v| !v.is_empty())
    else {
        return true;
    };
    // Read here rather than through `crate::sidecarset`, which depends on this module's
    // parent: the same JSON map and comma-separated list.
    let Ok(states) = serde_json::from_str::<BTreeMap<String, InPlaceUpdateState>>(value) else {
        return false;
    };
    let sets: Vec<&str> = annotations
        .and_then(|a| a.get(keys::SIDECARSET_INJECTED_LIST_ANNOTATION))
        .map(String::as_str)
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .collect();
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let injected = |name: &str| {
        containers.iter().any(|c| {
            c.name == name
                && c.env.iter().flatten().any(|e| {
                    e.name == keys::ENV_SIDECAR_IS_INJECTED && e.value.as_deref() == Some("true")
                })
        })
    };
    let last: BTreeMap<&str, &str> = sets
        .iter()
        .filter_map(|s| states.get(*s))
        .flat_map(|st| st.last_container_statuses.iter())
        .map(|(name, st)| (name.as_str(), st.image_id.as_str()))
        .collect();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    statuses.iter().filter(|s| injected(&s.name)).all(|s| {
        let spec_image = containers
            .iter()
            .find(|c| c.name == s.name)
            .and_then(|c| c.image.as_deref())
            .unwrap_or_default();
        last.get(s.name.as_str())
            .is_none_or(|old| *old != s.image_id || same_image(spec_image, &s.image))
    })
}

/// Whether the image a status reports is the spec's, allowing for the runtime's fully
/// qualified spelling (`nginx:1` runs as `docker.io/library/nginx:1`).
pub fn same_image(spec: &str, status: &str) -> bool {
    status == spec || status.ends_with(&format!("/{spec}"))
}

/// Counts towards `currentAvailable`: ready and consistent.
pub fn is_pod_available(pod: &Pod) -> bool {
    is_pod_ready(pod) && is_pod_state_consistent(pod)
}

/// The operations a budget protects (upstream `isNeedPubProtection`): the annotation's
/// values, or DELETE, UPDATE and EVICT when it is absent or empty; without in-place vertical
/// scaling a resize is an update, so UPDATE implies RESIZE.
pub fn protected_operations(
    annotations: Option<&BTreeMap<String, String>>,
    inplace_vertical_scaling: bool,
) -> BTreeSet<PubOperation> {
    let value = annotations
        .and_then(|a| a.get(keys::PUB_PROTECT_OPERATIONS_ANNOTATION))
        .map(String::as_str)
        .unwrap_or_default();
    let mut ops: BTreeSet<PubOperation> = if value.is_empty() {
        [
            PubOperation::Delete,
            PubOperation::Update,
            PubOperation::Evict,
        ]
        .into()
    } else {
        value.split(',').filter_map(PubOperation::parse).collect()
    };
    if !inplace_vertical_scaling && ops.contains(&PubOperation::Update) {
        ops.insert(PubOperation::Resize);
    }
    ops
}

/// The values of `kruise.io/pub-protect-operations` that are not an operation (the webhook
/// refuses them; the match is exact, as upstream's).
pub fn invalid_protect_operations(value: &str) -> Vec<&str> {
    value
        .split(',')
        .filter(|v| PubOperation::parse(v).is_none())
        .collect()
}

/// The `pub.kruise.io/protect-total-replicas` override: `None` when absent or empty; an
/// unparseable value counts as 0, as upstream's ignored `ParseInt` error does.
pub fn protect_total_replicas(annotations: Option<&BTreeMap<String, String>>) -> Option<i32> {
    let value = annotations?.get(keys::PUB_PROTECT_TOTAL_REPLICAS_ANNOTATION)?;
    if value.is_empty() {
        return None;
    }
    Some(value.parse::<i32>().unwrap_or(0))
}

/// Why a budget's numbers cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// The int-or-percent is a string that is not `<int>%`.
    #[error("invalid value for IntOrString: invalid type: string is not a percentage: {0:?}")]
    NotAPercentage(String),
    /// The digits before `%` are not an integer.
    #[error("invalid value {0:?}: the percentage must be an integer")]
    BadPercentage(String),
}

/// An int-or-percent scaled against `total`, percentages rounded up (upstream
/// `GetScaledValueFromIntOrPercent(v, total, true)`).
pub fn scaled_round_up(v: &IntOrString, total: i32) -> Result<i32, BudgetError> {
    match v {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let digits = s
                .strip_suffix('%')
                .ok_or_else(|| BudgetError::NotAPercentage(s.clone()))?;
            let pct: i64 = digits
                .parse()
                .map_err(|_| BudgetError::BadPercentage(s.clone()))?;
            let scaled = (pct * i64::from(total) + 99).div_euclid(100);
            Ok(i32::try_from(scaled).unwrap_or(if scaled < 0 { i32::MIN } else { i32::MAX }))
        }
    }
}

/// How many covered Pods must stay available (upstream `getDesiredAvailableForPub`):
/// `expected - maxUnavailable` (never below 0), or `minAvailable`; both scaled with round-up.
pub fn desired_available(
    spec: &PodUnavailableBudgetSpec,
    expected: i32,
) -> Result<i32, BudgetError> {
    if let Some(max) = &spec.max_unavailable {
        let max = scaled_round_up(max, expected)?;
        return Ok(expected.saturating_sub(max).max(0));
    }
    match &spec.min_available {
        Some(min) => scaled_round_up(min, expected),
        None => Ok(0),
    }
}

/// How many more may become unavailable: `current - desired`, never below 0.
pub fn unavailable_allowed(current_available: i32, desired_available: i32) -> i32 {
    current_available.saturating_sub(desired_available).max(0)
}

/// The `disruptedPods` / `unavailablePods` the controller keeps (upstream
/// `buildDisruptedAndUnavailablePods`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Entries {
    /// Entries of `disruptedPods` still waiting for their Pod to go.
    pub disrupted: BTreeMap<String, Time>,
    /// Entries of `unavailablePods` still inside their delay.
    pub unavailable: BTreeMap<String, Time>,
    /// When the next kept entry expires: the controller looks again then.
    pub recheck: Option<Timestamp>,
    /// Pods whose admitted deletion did not happen in time (upstream's `NotDeleted` Event).
    pub not_deleted: Vec<String>,
}

/// Keeps the entries of active Pods that have not expired: a deleted or finished Pod drops
/// its entry, a `disruptedPods` entry expires after [`DELETION_TIMEOUT`], an
/// `unavailablePods` one after [`UPDATE_DELAY_CHECK`].
pub fn prune_entries(
    status: &PodUnavailableBudgetStatus,
    pods: &[&Pod],
    now: Timestamp,
) -> Entries {
    let mut out = Entries::default();
    for pod in pods.iter().filter(|p| is_active(p)) {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if let Some(at) = status.disrupted_pods.get(&name) {
            let expiry = at.0 + DELETION_TIMEOUT;
            if expiry < now {
                out.not_deleted.push(name.clone());
            } else {
                out.disrupted.insert(name.clone(), at.clone());
                out.recheck = Some(out.recheck.map_or(expiry, |r| r.min(expiry)));
            }
        }
        if let Some(at) = status.unavailable_pods.get(&name) {
            let expiry = at.0 + UPDATE_DELAY_CHECK;
            if expiry >= now {
                out.unavailable.insert(name, at.clone());
                out.recheck = Some(out.recheck.map_or(expiry, |r| r.min(expiry)));
            }
        }
    }
    out
}

/// Covered Pods available now: active, not recorded in `disruptedPods`/`unavailablePods`,
/// ready and consistent (upstream `countAvailablePods`).
pub fn count_available(pods: &[&Pod], entries: &Entries) -> i32 {
    let n = pods
        .iter()
        .filter(|p| is_active(p))
        .filter(|p| {
            let name = p.metadata.name.as_deref().unwrap_or_default();
            !entries.disrupted.contains_key(name) && !entries.unavailable.contains_key(name)
        })
        .filter(|p| is_pod_available(p))
        .count();
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The status the controller writes (upstream `updatePubStatus`).
pub fn compute_status(
    generation: i64,
    expected: i32,
    desired: i32,
    pods: &[&Pod],
    entries: &Entries,
) -> PodUnavailableBudgetStatus {
    let current = count_available(pods, entries);
    PodUnavailableBudgetStatus {
        observed_generation: generation,
        disrupted_pods: entries.disrupted.clone(),
        unavailable_pods: entries.unavailable.clone(),
        unavailable_allowed: unavailable_allowed(current, desired),
        current_available: current,
        desired_available: desired,
        total_replicas: expected,
    }
}

/// Whether the Pod already has an entry: its operation was charged and is not charged again
/// (upstream `isPodRecordedInPub`).
pub fn is_recorded(status: &PodUnavailableBudgetStatus, pod_name: &str) -> bool {
    status.disrupted_pods.contains_key(pod_name) || status.unavailable_pods.contains_key(pod_name)
}

/// Whether an operation on `pod` costs the budget anything (upstream's checks before
/// `checkAndDecrement`): the budget requires some Pods available, protects the operation, and
/// has no entry for the Pod yet.
pub fn needs_charge(
    budget: &PodUnavailableBudget,
    pod: &str,
    op: PubOperation,
    inplace_vertical_scaling: bool,
) -> bool {
    let empty = PodUnavailableBudgetStatus::default();
    let status = budget.status.as_ref().unwrap_or(&empty);
    status.desired_available != 0
        && protected_operations(
            budget.metadata.annotations.as_ref(),
            inplace_vertical_scaling,
        )
        .contains(&op)
        && !is_recorded(status, pod)
}

/// Whether a Pod is exempt from every budget or does not count now (not Running and Ready,
/// the unavailable label, mid in-place update): disrupting it costs nothing.
pub fn is_exempt(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::PUB_NO_PROTECT_ANNOTATION))
        .is_some_and(|v| v == "true")
        || !is_pod_ready(pod)
        || !is_pod_state_consistent(pod)
}

/// The budget a Pod names in `kruise.io/related-pub`.
pub fn related_budget_name(pod: &Pod) -> Option<&str> {
    related_budget_name_in(pod.metadata.annotations.as_ref()?)
}

/// [`related_budget_name`] from a Pod's annotations alone, for callers that read them without
/// decoding the rest of the Pod.
pub fn related_budget_name_in(annotations: &BTreeMap<String, String>) -> Option<&str> {
    annotations
        .get(keys::PUB_RELATED_ANNOTATION)
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

/// Why the webhook refuses a disruption (upstream `checkAndDecrement`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChargeRefused {
    /// No disruption allowed now.
    #[error(
        "podunavailablebudget.policy.kruise.io {0:?} is forbidden: pub unavailable allowed is negative"
    )]
    NoBudget(String),
    /// Too many admitted disruptions the controller has not confirmed yet.
    #[error(
        "podunavailablebudget.policy.kruise.io {0:?} is forbidden: DisruptedPods and UnavailablePods map too big - too many unavailable not confirmed by PUB controller"
    )]
    TooManyEntries(String),
}

/// Whether an API error message is the budget webhook's refusal of a disruption (either
/// [`ChargeRefused`], as the API server relays it): a writer that is refused waits for the
/// budget rather than failing.
pub fn is_charge_refusal(message: &str) -> bool {
    message.contains("podunavailablebudget.policy.kruise.io ")
        && (message.contains(" is forbidden: pub unavailable allowed is negative")
            || message.contains(" is forbidden: DisruptedPods and UnavailablePods map too big"))
}

/// Charges one disruption of `pod_name` to the budget: one less allowed and an entry with
/// `now` (`unavailablePods` for an update, `disruptedPods` otherwise); refused when nothing
/// is allowed or the maps are full.
pub fn charge(
    pub_: &mut PodUnavailableBudget,
    pod_name: &str,
    operation: PubOperation,
    now: Timestamp,
) -> Result<(), ChargeRefused> {
    let name = pub_.metadata.name.clone().unwrap_or_default();
    let status = pub_.status.get_or_insert_with(Default::default);
    if status.unavailable_allowed <= 0 {
        return Err(ChargeRefused::NoBudget(name));
    }
    if status.disrupted_pods.len() + status.unavailable_pods.len() > MAX_UNAVAILABLE_POD_SIZE {
        return Err(ChargeRefused::TooManyEntries(name));
    }
    status.unavailable_allowed -= 1;
    let entries = if operation == PubOperation::Update {
        &mut status.unavailable_pods
    } else {
        &mut status.disrupted_pods
    };
    entries.insert(pod_name.to_owned(), Time(now));
    Ok(())
}

/// Whether an update of the Pod may make it unavailable (upstream `IsPodUnavailableChanged`):
/// its spec changes, or it gains the unavailable label.
pub fn is_unavailable_changed(old: &Pod, new: &Pod) -> bool {
    old.spec != new.spec
        || (!has_unavailable_label(old.metadata.labels.as_ref())
            && has_unavailable_label(new.metadata.labels.as_ref()))
}

/// Resources Kubernetes resizes in place (upstream's native vertical update: cpu, memory).
const RESIZABLE: [&str; 2] = [k8s::RESOURCE_CPU, k8s::RESOURCE_MEMORY];

/// Whether the update is a resize that restarts nothing (upstream `CanResizeInplace`): no
/// unavailable label gained, only container resources changed, only cpu and memory, none of
/// them with a `RestartContainer` resize policy, not a static Pod, and the QoS class kept.
pub fn can_resize_in_place(old: &Pod, new: &Pod) -> bool {
    if !has_unavailable_label(old.metadata.labels.as_ref())
        && has_unavailable_label(new.metadata.labels.as_ref())
    {
        return false;
    }
    let (Some(os), Some(ns)) = (old.spec.as_ref(), new.spec.as_ref()) else {
        return false;
    };
    let strip = |s: &k8s_openapi::api::core::v1::PodSpec| {
        let mut s = s.clone();
        for c in &mut s.containers {
            c.resources = None;
        }
        s
    };
    if strip(os) != strip(ns) || is_static(old) || is_static(new) || qos(os) != qos(ns) {
        return false;
    }
    if os.containers.len() != ns.containers.len() {
        return false;
    }
    ns.containers.iter().all(|c| {
        let Some(o) = os.containers.iter().find(|o| o.name == c.name) else {
            return false;
        };
        let (or, nr) = (
            o.resources.clone().unwrap_or_default(),
            c.resources.clone().unwrap_or_default(),
        );
        let mut names: BTreeSet<&String> = BTreeSet::new();
        for list in [&or.requests, &nr.requests, &or.limits, &nr.limits]
            .into_iter()
            .flatten()
        {
            names.extend(list.keys());
        }
        names.into_iter().all(|name| {
            let get =
                |l: &Option<BTreeMap<String, _>>| l.as_ref().and_then(|m| m.get(name)).cloned();
            let changed =
                get(&or.requests) != get(&nr.requests) || get(&or.limits) != get(&nr.limits);
            if !changed {
                return true;
            }
            let restarts = c.resize_policy.iter().flatten().any(|p| {
                &p.resource_name == name && p.restart_policy == k8s::RESIZE_RESTART_CONTAINER
            });
            RESIZABLE.contains(&name.as_str()) && !restarts
        })
    })
}

fn is_static(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("kubernetes.io/config.source"))
        .is_some_and(|s| s != "api")
}

/// The QoS class as Kubernetes computes it, close enough to tell a change: BestEffort without
/// any cpu/memory request or limit, Guaranteed when every container limits both and requests
/// equal limits, Burstable otherwise.
fn qos(spec: &k8s_openapi::api::core::v1::PodSpec) -> &'static str {
    let mut any = false;
    let mut guaranteed = true;
    for c in &spec.containers {
        let r = c.resources.clone().unwrap_or_default();
        for name in RESIZABLE {
            let req = r.requests.as_ref().and_then(|m| m.get(name));
            let lim = r.limits.as_ref().and_then(|m| m.get(name));
            any |= req.is_some() || lim.is_some();
            guaranteed &= lim.is_some() && req.is_none_or(|q| Some(q) == lim);
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}
