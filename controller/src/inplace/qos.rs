//! The pod QoS class, computed the way the kubelet does, so that a resource change that would
//! move a pod to another class is refused (the class of a running pod cannot change).

use super::quantity;
use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kruise_api::keys::k8s;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl fmt::Display for QosClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        })
    }
}

const QOS_RESOURCES: [&str; 2] = [k8s::RESOURCE_CPU, k8s::RESOURCE_MEMORY];

/// Sums of the positive cpu/memory quantities, in nano units.
#[derive(Default)]
struct Totals(BTreeMap<&'static str, i128>);

impl Totals {
    fn add(&mut self, list: Option<&BTreeMap<String, Quantity>>) -> BTreeSet<&'static str> {
        let mut found = BTreeSet::new();
        for name in QOS_RESOURCES {
            let Some(q) = list.and_then(|l| l.get(name)) else {
                continue;
            };
            let value = quantity::nano_value(&q.0).unwrap_or(0);
            if value > 0 {
                found.insert(name);
                let total = self.0.entry(name).or_insert(0);
                *total = total.saturating_add(value);
            }
        }
        found
    }
}

pub fn compute(spec: &PodSpec) -> QosClass {
    let mut requests = Totals::default();
    let mut limits = Totals::default();
    let mut guaranteed = true;

    // Pod-level resources (on by default since 1.34) replace the per-container computation.
    if let Some(pod_resources) = spec.resources.as_ref() {
        requests.add(pod_resources.requests.as_ref());
        if pod_resources.limits.as_ref().is_some_and(|l| !l.is_empty()) {
            let found = limits.add(pod_resources.limits.as_ref());
            guaranteed &= found.len() == QOS_RESOURCES.len();
        }
    } else {
        for c in spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
        {
            let res = c.resources.as_ref();
            requests.add(res.and_then(|r| r.requests.as_ref()));
            let found = limits.add(res.and_then(|r| r.limits.as_ref()));
            guaranteed &= found.len() == QOS_RESOURCES.len();
        }
    }

    if requests.0.is_empty() && limits.0.is_empty() {
        return QosClass::BestEffort;
    }
    if guaranteed {
        for (name, req) in &requests.0 {
            if limits.0.get(name) != Some(req) {
                guaranteed = false;
                break;
            }
        }
    }
    if guaranteed && requests.0.len() == limits.0.len() {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, ResourceRequirements};

    fn res(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Option<ResourceRequirements> {
        let to_map = |l: &[(&str, &str)]| {
            (!l.is_empty()).then(|| {
                l.iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect()
            })
        };
        Some(ResourceRequirements {
            requests: to_map(requests),
            limits: to_map(limits),
            ..Default::default()
        })
    }

    fn spec(containers: Vec<Option<ResourceRequirements>>) -> PodSpec {
        PodSpec {
            containers: containers
                .into_iter()
                .enumerate()
                .map(|(i, resources)| Container {
                    name: format!("c{i}"),
                    resources,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn classes() {
        let full = &[("cpu", "1"), ("memory", "1Gi")];
        let cases = vec![
            (spec(vec![None]), QosClass::BestEffort),
            (spec(vec![res(&[("cpu", "0")], &[])]), QosClass::BestEffort),
            (spec(vec![res(full, full)]), QosClass::Guaranteed),
            (
                spec(vec![res(&[("cpu", "1000m"), ("memory", "1024Mi")], full)]),
                QosClass::Guaranteed,
            ),
            (spec(vec![res(&[], full)]), QosClass::Burstable),
            (
                spec(vec![res(&[("cpu", "500m"), ("memory", "1Gi")], full)]),
                QosClass::Burstable,
            ),
            (spec(vec![res(full, full), None]), QosClass::Burstable),
            (spec(vec![res(&[("cpu", "1")], &[])]), QosClass::Burstable),
            (
                spec(vec![res(full, full), res(full, full)]),
                QosClass::Guaranteed,
            ),
            (
                spec(vec![res(&[("ephemeral-storage", "1Gi")], &[])]),
                QosClass::BestEffort,
            ),
        ];
        for (i, (s, want)) in cases.into_iter().enumerate() {
            assert_eq!(compute(&s), want, "case {i}");
        }
    }

    #[test]
    fn pod_level_resources_win() {
        let mut s = spec(vec![None]);
        s.resources = res(&[], &[("cpu", "1"), ("memory", "1Gi")]);
        assert_eq!(compute(&s), QosClass::Burstable);
        s.resources = res(
            &[("cpu", "1"), ("memory", "1Gi")],
            &[("cpu", "1"), ("memory", "1Gi")],
        );
        assert_eq!(compute(&s), QosClass::Guaranteed);
    }
}
