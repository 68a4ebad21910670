//! The gauges of each kind with workload metrics: kube-state-metrics' names under
//! `kruise_<kind>_`, read from the object as the controller's store holds it.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1alpha1::{EphemeralJob, UnitedDeployment, WorkloadSpread};
use kruise_api::apps::v1beta1::{
    AdvancedCronJob, BroadcastJob, CloneSet, DaemonSet, ImagePullJob, SidecarSet, StatefulSet,
};
use kruise_api::policy::v1alpha1::PodUnavailableBudget;
use kube::Resource;

/// One gauge of a kind: its name under the `kruise_<kind>_` prefix, help, and value.
pub struct G<K> {
    pub name: &'static str,
    pub help: &'static str,
    pub value: fn(&K) -> i64,
}

const fn g<K>(name: &'static str, help: &'static str, value: fn(&K) -> i64) -> G<K> {
    G { name, help, value }
}

fn generation<K: Resource>(o: &K) -> i64 {
    o.meta().generation.unwrap_or(0)
}

/// A partition as a count of `total` (percentages rounded up, as the controllers scale them).
pub fn scaled(v: Option<&IntOrString>, total: i32) -> i64 {
    let total = i64::from(total.max(0));
    match v {
        None => 0,
        Some(IntOrString::Int(i)) => i64::from(*i).clamp(0, total),
        Some(IntOrString::String(s)) => s
            .strip_suffix('%')
            .and_then(|p| p.parse::<i64>().ok())
            .map_or(0, |p| (p * total + 99) / 100)
            .clamp(0, total),
    }
}

/// A status field as a gauge value, 0 while there is no status.
macro_rules! status {
    ($field:ident) => {
        |o| o.status.as_ref().map_or(0, |s| i64::from(s.$field))
    };
}

const GENERATION: &str = "Sequence number of the desired state (metadata.generation)";
const OBSERVED: &str = "The generation the controller last acted on";
const PAUSED: &str = "1 while the rollout is paused";

fn cloneset_partition(o: &CloneSet) -> i64 {
    let ru = o.spec.update_strategy.rolling_update.as_ref();
    scaled(
        ru.and_then(|r| r.partition.as_ref()),
        o.spec.replicas.unwrap_or(1),
    )
}

pub static CLONESET: &[G<CloneSet>] = &[
    g("spec_replicas", "Desired Pods", |o| {
        i64::from(o.spec.replicas.unwrap_or(1))
    }),
    g(
        "spec_strategy_partition",
        "Pods kept at the old revision by the partition",
        cloneset_partition,
    ),
    g("spec_strategy_paused", PAUSED, |o| {
        i64::from(
            o.spec
                .update_strategy
                .rolling_update
                .as_ref()
                .is_some_and(|r| r.paused),
        )
    }),
    g("metadata_generation", GENERATION, generation),
    g(
        "status_observed_generation",
        OBSERVED,
        status!(observed_generation),
    ),
    g(
        "status_replicas",
        "Pods the CloneSet has",
        status!(replicas),
    ),
    g(
        "status_replicas_ready",
        "Ready Pods",
        status!(ready_replicas),
    ),
    g(
        "status_replicas_available",
        "Available Pods",
        status!(available_replicas),
    ),
    g(
        "status_replicas_updated",
        "Pods at the update revision",
        status!(updated_replicas),
    ),
    g(
        "status_replicas_updated_ready",
        "Ready Pods at the update revision",
        status!(updated_ready_replicas),
    ),
    g(
        "status_replicas_updated_available",
        "Available Pods at the update revision",
        status!(updated_available_replicas),
    ),
    g(
        "status_replicas_expected_updated",
        "Pods the partition lets be updated",
        status!(expected_updated_replicas),
    ),
];

pub static STATEFULSET: &[G<StatefulSet>] = &[
    g("spec_replicas", "Desired Pods", |o| {
        i64::from(o.spec.replicas.unwrap_or(1))
    }),
    g(
        "spec_strategy_partition",
        "Ordinals below it are kept at the old revision",
        |o| {
            let ru = o.spec.update_strategy.rolling_update.as_ref();
            i64::from(ru.and_then(|r| r.partition).unwrap_or(0))
        },
    ),
    g("spec_strategy_paused", PAUSED, |o| {
        i64::from(
            o.spec
                .update_strategy
                .rolling_update
                .as_ref()
                .is_some_and(|r| r.paused),
        )
    }),
    g("metadata_generation", GENERATION, generation),
    g(
        "status_observed_generation",
        OBSERVED,
        status!(observed_generation),
    ),
    g(
        "status_replicas",
        "Pods the StatefulSet has",
        status!(replicas),
    ),
    g(
        "status_replicas_ready",
        "Ready Pods",
        status!(ready_replicas),
    ),
    g(
        "status_replicas_available",
        "Available Pods",
        status!(available_replicas),
    ),
    g(
        "status_replicas_current",
        "Pods at the current revision",
        status!(current_replicas),
    ),
    g(
        "status_replicas_updated",
        "Pods at the update revision",
        status!(updated_replicas),
    ),
    g(
        "status_replicas_updated_ready",
        "Ready Pods at the update revision",
        status!(updated_ready_replicas),
    ),
];

pub static DAEMONSET: &[G<DaemonSet>] = &[
    g(
        "spec_strategy_partition",
        "Nodes kept at the old revision by the partition",
        |o| {
            let ru = o.spec.update_strategy.rolling_update.as_ref();
            let desired = o.status.as_ref().map_or(0, |s| s.desired_number_scheduled);
            scaled(ru.and_then(|r| r.partition.as_ref()), desired)
        },
    ),
    g("spec_strategy_paused", PAUSED, |o| {
        let ru = o.spec.update_strategy.rolling_update.as_ref();
        i64::from(ru.and_then(|r| r.paused).unwrap_or(false))
    }),
    g("metadata_generation", GENERATION, generation),
    g(
        "status_observed_generation",
        OBSERVED,
        status!(observed_generation),
    ),
    g(
        "status_desired_number_scheduled",
        "Nodes that should run the daemon Pod",
        status!(desired_number_scheduled),
    ),
    g(
        "status_current_number_scheduled",
        "Nodes running the daemon Pod that should",
        status!(current_number_scheduled),
    ),
    g(
        "status_number_misscheduled",
        "Nodes running the daemon Pod that should not",
        status!(number_misscheduled),
    ),
    g(
        "status_number_ready",
        "Nodes with a ready daemon Pod",
        status!(number_ready),
    ),
    g(
        "status_number_available",
        "Nodes with an available daemon Pod",
        status!(number_available),
    ),
    g(
        "status_number_unavailable",
        "Nodes without an available daemon Pod",
        status!(number_unavailable),
    ),
    g(
        "status_updated_number_scheduled",
        "Nodes running the updated daemon Pod",
        status!(updated_number_scheduled),
    ),
];

pub static SIDECARSET: &[G<SidecarSet>] = &[
    g(
        "spec_strategy_partition",
        "Matched Pods kept at the old sidecars by the partition",
        |o| {
            let matched = o.status.as_ref().map_or(0, |s| s.matched_pods);
            scaled(o.spec.update_strategy.partition.as_ref(), matched)
        },
    ),
    g("spec_strategy_paused", PAUSED, |o| {
        i64::from(o.spec.update_strategy.paused)
    }),
    g("metadata_generation", GENERATION, generation),
    g(
        "status_observed_generation",
        OBSERVED,
        status!(observed_generation),
    ),
    g(
        "status_replicas_matched",
        "Pods the SidecarSet matches",
        status!(matched_pods),
    ),
    g(
        "status_replicas_updated",
        "Matched Pods with the latest sidecars",
        status!(updated_pods),
    ),
    g(
        "status_replicas_ready",
        "Matched Pods that are ready",
        status!(ready_pods),
    ),
    g(
        "status_replicas_updated_ready",
        "Matched Pods with the latest sidecars, ready",
        status!(updated_ready_pods),
    ),
];

pub static UNITEDDEPLOYMENT: &[G<UnitedDeployment>] = &[
    g("spec_replicas", "Desired Pods over all subsets", |o| {
        i64::from(o.spec.replicas.unwrap_or(1))
    }),
    g(
        "spec_strategy_partition",
        "Pods kept at the old revision by the subsets' partitions",
        |o| {
            let manual = o.spec.update_strategy.manual_update.as_ref();
            manual.map_or(0, |m| m.partitions.values().map(|p| i64::from(*p)).sum())
        },
    ),
    g("metadata_generation", GENERATION, generation),
    g(
        "status_observed_generation",
        OBSERVED,
        status!(observed_generation),
    ),
    g(
        "status_replicas",
        "Pods over all subsets",
        status!(replicas),
    ),
    g(
        "status_replicas_ready",
        "Ready Pods",
        status!(ready_replicas),
    ),
    g(
        "status_replicas_updated",
        "Pods at the update revision",
        status!(updated_replicas),
    ),
    g(
        "status_replicas_updated_ready",
        "Ready Pods at the update revision",
        status!(updated_ready_replicas),
    ),
];

pub static BUDGET: &[G<PodUnavailableBudget>] = &[
    g("metadata_generation", GENERATION, generation),
    g(
        "status_observed_generation",
        OBSERVED,
        status!(observed_generation),
    ),
    g(
        "status_unavailable_allowed",
        "Pods that may be disrupted now",
        status!(unavailable_allowed),
    ),
    g(
        "status_current_available",
        "Protected Pods available now",
        status!(current_available),
    ),
    g(
        "status_desired_available",
        "Pods the budget keeps available",
        status!(desired_available),
    ),
    g(
        "status_total_replicas",
        "Pods the budget protects",
        status!(total_replicas),
    ),
];

pub static WORKLOADSPREAD: &[G<WorkloadSpread>] = &[
    g("metadata_generation", GENERATION, generation),
    g("status_observed_generation", OBSERVED, |o| {
        o.status.as_ref().map_or(0, |s| s.observed_generation)
    }),
];

/// A job's completion time as seconds since the epoch, 0 until it has one.
fn epoch(t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> i64 {
    t.map_or(0, |t| t.0.as_second())
}

pub static BROADCASTJOB: &[G<BroadcastJob>] = &[
    g("spec_paused", PAUSED, |o| i64::from(o.spec.paused)),
    g(
        "status_desired",
        "Nodes the job should run a Pod on",
        status!(desired),
    ),
    g("status_active", "Pods running", status!(active)),
    g(
        "status_succeeded",
        "Pods that ended successfully",
        status!(succeeded),
    ),
    g("status_failed", "Pods that failed", status!(failed)),
    g(
        "status_completion_time",
        "When the job finished (Unix seconds; 0 while it runs)",
        |o| epoch(o.status.as_ref().and_then(|s| s.completion_time.as_ref())),
    ),
];

pub static ADVANCEDCRONJOB: &[G<AdvancedCronJob>] = &[
    g("spec_paused", PAUSED, |o| {
        i64::from(o.spec.paused.unwrap_or(false))
    }),
    g("status_active", "Jobs running now", |o| {
        o.status
            .as_ref()
            .map_or(0, |s| i64::try_from(s.active.len()).unwrap_or(i64::MAX))
    }),
    g(
        "status_last_schedule_time",
        "When a job was last started (Unix seconds; 0 before the first)",
        |o| {
            epoch(
                o.status
                    .as_ref()
                    .and_then(|s| s.last_schedule_time.as_ref()),
            )
        },
    ),
];

pub static EPHEMERALJOB: &[G<EphemeralJob>] = &[
    g("spec_paused", PAUSED, |o| i64::from(o.spec.paused)),
    g(
        "status_matches",
        "Pods the job's selector matches",
        status!(matches),
    ),
    g(
        "status_running",
        "Targets whose ephemeral containers run",
        status!(running),
    ),
    g(
        "status_waiting",
        "Targets whose ephemeral containers wait",
        status!(waiting),
    ),
    g(
        "status_succeeded",
        "Targets whose ephemeral containers exited 0",
        status!(succeeded),
    ),
    g(
        "status_failed",
        "Targets whose ephemeral containers failed",
        status!(failed),
    ),
];

pub static IMAGEPULLJOB: &[G<ImagePullJob>] = &[
    g(
        "status_desired",
        "Nodes to pull the image on",
        status!(desired),
    ),
    g("status_active", "Nodes pulling now", status!(active)),
    g(
        "status_succeeded",
        "Nodes that pulled the image",
        status!(succeeded),
    ),
    g(
        "status_failed",
        "Nodes that failed to pull",
        status!(failed),
    ),
    g(
        "status_completion_time",
        "When the job finished (Unix seconds; 0 while it runs)",
        |o| epoch(o.status.as_ref().and_then(|s| s.completion_time.as_ref())),
    ),
];

/// BroadcastJob's `status.phase` values, as upstream writes them.
pub const BROADCASTJOB_PHASES: &[&str] = &["running", "paused", "completed", "failed"];
/// EphemeralJob's `status.phase` values, as upstream writes them.
pub const EPHEMERALJOB_PHASES: &[&str] = &[
    "Waiting",
    "Running",
    "Paused",
    "Succeeded",
    "Failed",
    "Error",
    "Unknown",
];
