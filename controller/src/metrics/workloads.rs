//! Workload metrics, named as kube-state-metrics and kruise-state-metrics name them
//! (`kruise_cloneset_spec_replicas{namespace,name}`, …), computed at each scrape from the
//! stores the controllers already keep: no request of their own, and a deleted object's series
//! are gone at the next scrape because it is gone from the store. Labels are the object's
//! namespace and name (plus a condition's type and status, or a revision's name): never a Pod.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use kruise_api::apps::v1alpha1::UnitedDeployment;
use kruise_api::apps::v1beta1::{CloneSet, DaemonSet, SidecarSet, StatefulSet};
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
        Ok(())
    }
}

#[cfg(test)]
#[path = "workloads_tests.rs"]
mod tests;
