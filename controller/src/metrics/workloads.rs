//! Workload metrics, named as kube-state-metrics and kruise-state-metrics name them
//! (`kruise_cloneset_spec_replicas{namespace,name}`, …), computed at each scrape from the
//! stores the controllers already keep: no request of their own, and a deleted object's series
//! are gone at the next scrape because it is gone from the store. Labels are the object's
//! namespace and name (plus a condition's type and status, or a revision's name): never a Pod.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use kruise_api::apps::v1alpha1::{EphemeralJob, UnitedDeployment, WorkloadSpread};
use kruise_api::apps::v1beta1::{
    AdvancedCronJob, BroadcastJob, CloneSet, DaemonSet, ImagePullJob, SidecarSet, StatefulSet,
};
use kruise_api::policy::v1alpha1::PodUnavailableBudget;
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};

use super::tables::{self, G};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjectLabels {
    namespace: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConditionLabels {
    namespace: String,
    name: String,
    condition: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    namespace: String,
    name: String,
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SubsetLabels {
    namespace: String,
    name: String,
    subset: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RevisionLabels {
    namespace: String,
    name: String,
    revision: String,
}

/// One store a controller fills, handed over when the controller starts.
pub struct Slot<K: Resource + 'static>(RwLock<Option<Store<K>>>)
where
    K::DynamicType: Eq + std::hash::Hash + Clone;

impl<K: Resource + Clone + 'static> Slot<K>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    fn new() -> Self {
        Self(RwLock::new(None))
    }

    /// The controller's store; the series follow what it holds from now on.
    pub fn set(&self, store: Store<K>) {
        if let Ok(mut slot) = self.0.write() {
            *slot = Some(store);
        }
    }

    fn objects(&self) -> Vec<Arc<K>> {
        let mut objs = self
            .0
            .read()
            .ok()
            .and_then(|s| s.as_ref().map(Store::state))
            .unwrap_or_default();
        // Stable output: scrapes diff cleanly and tests read it.
        objs.sort_by_key(|o| (o.namespace(), o.name_any()));
        objs
    }
}

/// The stores of the kinds that have workload metrics; a [`Collector`] on the `kruise` prefix.
pub struct WorkloadMetrics {
    enabled: AtomicBool,
    /// 1 while this replica leads: a standby's stores are empty or stale, so it exports none.
    leading: Gauge,
    pub clonesets: Slot<CloneSet>,
    pub statefulsets: Slot<StatefulSet>,
    pub daemonsets: Slot<DaemonSet>,
    pub sidecarsets: Slot<SidecarSet>,
    pub uniteddeployments: Slot<UnitedDeployment>,
    pub budgets: Slot<PodUnavailableBudget>,
    pub workloadspreads: Slot<WorkloadSpread>,
    pub broadcastjobs: Slot<BroadcastJob>,
    pub advancedcronjobs: Slot<AdvancedCronJob>,
    pub ephemeraljobs: Slot<EphemeralJob>,
    pub imagepulljobs: Slot<ImagePullJob>,
}

impl fmt::Debug for WorkloadMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkloadMetrics")
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

impl WorkloadMetrics {
    pub fn new(leading: Gauge) -> Self {
        Self {
            enabled: AtomicBool::new(true),
            leading,
            clonesets: Slot::new(),
            statefulsets: Slot::new(),
            daemonsets: Slot::new(),
            sidecarsets: Slot::new(),
            uniteddeployments: Slot::new(),
            budgets: Slot::new(),
            workloadspreads: Slot::new(),
            broadcastjobs: Slot::new(),
            advancedcronjobs: Slot::new(),
            ephemeraljobs: Slot::new(),
            imagepulljobs: Slot::new(),
        }
    }

    /// `--workload-metrics`: off, no workload series are exported (the stores are kept anyway,
    /// by the controllers).
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }
}

fn labels<K: Resource>(o: &K) -> ObjectLabels {
    ObjectLabels {
        namespace: o.meta().namespace.clone().unwrap_or_default(),
        name: o.meta().name.clone().unwrap_or_default(),
    }
}

fn gauges<K: Resource>(
    enc: &mut DescriptorEncoder,
    kind: &str,
    objs: &[Arc<K>],
    table: &[G<K>],
) -> fmt::Result {
    for gauge in table {
        let name = format!("{kind}_{}", gauge.name);
        let mut m = enc.encode_descriptor(&name, gauge.help, None, MetricType::Gauge)?;
        for o in objs {
            ConstGauge::new((gauge.value)(o)).encode(m.encode_family(&labels(o.as_ref()))?)?;
        }
    }
    Ok(())
}

/// `<kind>_status_condition{condition,status}`: kube-state-metrics' three series per
/// condition, 1 on the status it has.
fn conditions<K: Resource>(
    enc: &mut DescriptorEncoder,
    kind: &str,
    objs: &[Arc<K>],
    of: fn(&K) -> Vec<(String, String)>,
) -> fmt::Result {
    let name = format!("{kind}_status_condition");
    let mut m = enc.encode_descriptor(
        &name,
        "The object's status conditions: 1 on the status each has",
        None,
        MetricType::Gauge,
    )?;
    for o in objs {
        let l = labels(o.as_ref());
        for (condition, status) in of(o) {
            for s in ["true", "false", "unknown"] {
                let labels = ConditionLabels {
                    namespace: l.namespace.clone(),
                    name: l.name.clone(),
                    condition: condition.clone(),
                    status: s.to_string(),
                };
                let v = i64::from(status.eq_ignore_ascii_case(s));
                ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
            }
        }
    }
    Ok(())
}

/// `<kind>_status_{current,update}_revision{revision}`: 1 on the revision's name; one series
/// of each per object at a time.
fn revisions<K: Resource>(
    enc: &mut DescriptorEncoder,
    kind: &str,
    objs: &[Arc<K>],
    of: fn(&K) -> (String, String),
) -> fmt::Result {
    for (which, help) in [
        ("current", "The revision the old Pods run"),
        ("update", "The revision Pods are updated to"),
    ] {
        let name = format!("{kind}_status_{which}_revision");
        let mut m = enc.encode_descriptor(&name, help, None, MetricType::Gauge)?;
        for o in objs {
            let (current, update) = of(o);
            let revision = if which == "current" { current } else { update };
            if revision.is_empty() {
                continue;
            }
            let l = labels(o.as_ref());
            let labels = RevisionLabels {
                namespace: l.namespace,
                name: l.name,
                revision,
            };
            ConstGauge::new(1).encode(m.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

/// `<kind>_status_phase{phase}`: kube-state-metrics' one series per phase, 1 on the phase the
/// object is in (none while it has no phase yet).
fn phases<K: Resource>(
    enc: &mut DescriptorEncoder,
    kind: &str,
    objs: &[Arc<K>],
    all: &[&str],
    of: fn(&K) -> String,
) -> fmt::Result {
    let name = format!("{kind}_status_phase");
    let mut m = enc.encode_descriptor(
        &name,
        "The object's phase: 1 on the phase it is in",
        None,
        MetricType::Gauge,
    )?;
    for o in objs {
        let l = labels(o.as_ref());
        let now = of(o);
        for phase in all {
            let labels = PhaseLabels {
                namespace: l.namespace.clone(),
                name: l.name.clone(),
                phase: (*phase).to_string(),
            };
            ConstGauge::new(i64::from(now == *phase)).encode(m.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

/// A phase enum as the word it is written as on the wire.
fn wire<T: serde::Serialize>(phase: &T) -> String {
    serde_json::to_value(phase)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// `workloadspread_subset_*{subset}`: each subset's Pods, room left and in-flight placements
/// (the subsets are the user's few names: bounded).
fn subsets(enc: &mut DescriptorEncoder, objs: &[Arc<WorkloadSpread>]) -> fmt::Result {
    type Of = fn(&kruise_api::apps::v1alpha1::WorkloadSpreadSubsetStatus) -> i64;
    let table: [(&str, &str, Of); 4] = [
        ("replicas", "Active Pods in the subset", |s| {
            i64::from(s.replicas)
        }),
        (
            "missing_replicas",
            "Pods the subset may still take (-1: no cap)",
            |s| i64::from(s.missing_replicas),
        ),
        (
            "creating_pods",
            "Pods placed in the subset by the webhook and not seen yet",
            |s| i64::try_from(s.creating_pods.len()).unwrap_or(i64::MAX),
        ),
        (
            "deleting_pods",
            "Pods whose deletion from the subset was admitted",
            |s| i64::try_from(s.deleting_pods.len()).unwrap_or(i64::MAX),
        ),
    ];
    for (field, help, value) in table {
        let name = format!("workloadspread_subset_{field}");
        let mut m = enc.encode_descriptor(&name, help, None, MetricType::Gauge)?;
        for o in objs {
            let l = labels(o.as_ref());
            for s in o.status.iter().flat_map(|st| st.subset_statuses.iter()) {
                let labels = SubsetLabels {
                    namespace: l.namespace.clone(),
                    name: l.name.clone(),
                    subset: s.name.clone(),
                };
                ConstGauge::new(value(s)).encode(m.encode_family(&labels)?)?;
            }
        }
    }
    Ok(())
}

impl WorkloadMetrics {
    /// The jobs' and WorkloadSpread's series (the workloads' are in [`Collector::encode`]).
    fn encode_jobs(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let ws = self.workloadspreads.objects();
        gauges(enc, "workloadspread", &ws, tables::WORKLOADSPREAD)?;
        subsets(enc, &ws)?;
        let bj = self.broadcastjobs.objects();
        gauges(enc, "broadcastjob", &bj, tables::BROADCASTJOB)?;
        phases(enc, "broadcastjob", &bj, tables::BROADCASTJOB_PHASES, |o| {
            o.status
                .as_ref()
                .map(|s| wire(&s.phase))
                .unwrap_or_default()
        })?;
        let acj = self.advancedcronjobs.objects();
        gauges(enc, "advancedcronjob", &acj, tables::ADVANCEDCRONJOB)?;
        let ej = self.ephemeraljobs.objects();
        gauges(enc, "ephemeraljob", &ej, tables::EPHEMERALJOB)?;
        phases(enc, "ephemeraljob", &ej, tables::EPHEMERALJOB_PHASES, |o| {
            o.status
                .as_ref()
                .map(|s| wire(&s.phase))
                .unwrap_or_default()
        })?;
        let ipj = self.imagepulljobs.objects();
        gauges(enc, "imagepulljob", &ipj, tables::IMAGEPULLJOB)
    }
}

impl Collector for WorkloadMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        if !self.enabled() || self.leading.get() != 1 {
            return Ok(());
        }
        let cs = self.clonesets.objects();
        gauges(&mut enc, "cloneset", &cs, tables::CLONESET)?;
        conditions(&mut enc, "cloneset", &cs, |o| {
            let st = o.status.as_ref();
            st.map(|s| {
                s.conditions
                    .iter()
                    .map(|c| (c.type_.clone(), c.status.clone()))
                    .collect()
            })
            .unwrap_or_default()
        })?;
        revisions(&mut enc, "cloneset", &cs, |o| {
            o.status.as_ref().map_or_else(Default::default, |s| {
                (s.current_revision.clone(), s.update_revision.clone())
            })
        })?;
        let sts = self.statefulsets.objects();
        gauges(&mut enc, "advancedstatefulset", &sts, tables::STATEFULSET)?;
        conditions(&mut enc, "advancedstatefulset", &sts, |o| {
            o.status.as_ref().map_or_else(Vec::new, |s| {
                s.conditions
                    .iter()
                    .map(|c| (c.type_.clone(), c.status.clone()))
                    .collect()
            })
        })?;
        revisions(&mut enc, "advancedstatefulset", &sts, |o| {
            o.status.as_ref().map_or_else(Default::default, |s| {
                (s.current_revision.clone(), s.update_revision.clone())
            })
        })?;
        let ds = self.daemonsets.objects();
        gauges(&mut enc, "daemonset", &ds, tables::DAEMONSET)?;
        let scs = self.sidecarsets.objects();
        gauges(&mut enc, "sidecarset", &scs, tables::SIDECARSET)?;
        let uds = self.uniteddeployments.objects();
        gauges(&mut enc, "uniteddeployment", &uds, tables::UNITEDDEPLOYMENT)?;
        let pubs = self.budgets.objects();
        gauges(&mut enc, "podunavailablebudget", &pubs, tables::BUDGET)?;
        self.encode_jobs(&mut enc)
    }
}

#[cfg(test)]
#[path = "workloads_tests.rs"]
mod tests;
