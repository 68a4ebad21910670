//! The pure half of the NodePodProbe controller (upstream `syncPodFromNodePodProbe`): from the
//! results the daemon wrote, the metadata and condition patches that mark a Pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use kruise_api::apps::v1alpha1::{ContainerProbeState, PodContainerProbe, ProbeState};
use serde_json::{Map, Value, json};

/// The writes that bring a Pod in line with its probe results.
#[derive(Debug, Default, PartialEq)]
pub struct PodMarks {
    /// A merge patch of `metadata.labels` / `metadata.annotations` (null removes a key).
    pub metadata: Option<Value>,
    /// Conditions to set through `pods/status`.
    pub conditions: Vec<PodCondition>,
}

fn condition<'a>(pod: &'a Pod, ty: &str) -> Option<&'a PodCondition> {
    kruise_api::pod::condition(pod, ty)
}

/// Puts the state's keys in `patch` where the Pod differs, and removes the other state's
/// keys the current state does not set.
fn mark(
    current: Option<&BTreeMap<String, String>>,
    want: &BTreeMap<String, String>,
    other: &BTreeMap<String, String>,
    patch: &mut Map<String, Value>,
) {
    for (k, v) in want {
        if current.and_then(|c| c.get(k)) != Some(v) {
            patch.insert(k.clone(), json!(v));
        }
    }
    for k in other.keys().filter(|k| !want.contains_key(*k)) {
        if current.is_some_and(|c| c.contains_key(k)) {
            patch.insert(k.clone(), Value::Null);
        }
    }
}

/// What `pod` needs for `results`: each (probe spec, its state). An Unknown state marks
/// nothing.
pub fn pod_marks(pod: &Pod, results: &[(&PodContainerProbe, &ContainerProbeState)]) -> PodMarks {
    let mut labels = Map::new();
    let mut annotations = Map::new();
    let mut conditions = Vec::new();
    let empty = BTreeMap::new();
    for (spec, st) in results {
        if st.state == ProbeState::Unknown {
            continue;
        }
        let policy = |s: ProbeState| spec.marker_policy.iter().find(|p| p.state == s);
        let other = match st.state {
            ProbeState::Succeeded => ProbeState::Failed,
            _ => ProbeState::Succeeded,
        };
        let (want, other) = (policy(st.state), policy(other));
        mark(
            pod.metadata.labels.as_ref(),
            want.map_or(&empty, |p| &p.labels),
            other.map_or(&empty, |p| &p.labels),
            &mut labels,
        );
        mark(
            pod.metadata.annotations.as_ref(),
            want.map_or(&empty, |p| &p.annotations),
            other.map_or(&empty, |p| &p.annotations),
            &mut annotations,
        );
        if spec.pod_condition_type.is_empty() {
            continue;
        }
        let status = if st.state == ProbeState::Succeeded {
            "True"
        } else {
            "False"
        };
        let cur = condition(pod, &spec.pod_condition_type);
        let message = (!st.message.is_empty()).then(|| st.message.clone());
        if cur.is_some_and(|c| c.status == status && c.message == message) {
            continue;
        }
        conditions.push(PodCondition {
            type_: spec.pod_condition_type.clone(),
            status: status.to_owned(),
            last_probe_time: st.last_probe_time.clone(),
            last_transition_time: match cur {
                Some(c) if c.status == status => c.last_transition_time.clone(),
                _ => st.last_transition_time.clone(),
            },
            message,
            reason: None,
            observed_generation: None,
        });
    }
    let mut meta = Map::new();
    if !labels.is_empty() {
        meta.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), Value::Object(annotations));
    }
    PodMarks {
        metadata: (!meta.is_empty()).then(|| json!({ "metadata": meta })),
        conditions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_api::apps::v1alpha1::ProbeMarkerPolicy;

    fn spec() -> PodContainerProbe {
        let pol = |s, v: &str| ProbeMarkerPolicy {
            state: s,
            labels: [("role".to_owned(), v.to_owned())].into(),
            annotations: if s == ProbeState::Failed {
                [("cost".to_owned(), "-10".to_owned())].into()
            } else {
                BTreeMap::new()
            },
        };
        PodContainerProbe {
            name: "p".into(),
            marker_policy: vec![
                pol(ProbeState::Succeeded, "main"),
                pol(ProbeState::Failed, "backup"),
            ],
            pod_condition_type: "x.io/ok".into(),
            ..Default::default()
        }
    }

    fn state(s: ProbeState) -> ContainerProbeState {
        ContainerProbeState {
            name: "m#p".into(),
            state: s,
            ..Default::default()
        }
    }

    #[test]
    fn success_sets_its_markers_and_removes_the_failed_ones() {
        let mut pod = Pod::default();
        pod.metadata.annotations = Some([("cost".to_owned(), "-10".to_owned())].into());
        let s = spec();
        let m = pod_marks(&pod, &[(&s, &state(ProbeState::Succeeded))]);
        assert_eq!(
            m.metadata,
            Some(json!({"metadata": {"labels": {"role": "main"}, "annotations": {"cost": null}}}))
        );
        assert_eq!(m.conditions.len(), 1);
        assert_eq!(m.conditions[0].status, "True");
    }

    #[test]
    fn a_pod_already_marked_needs_nothing_and_unknown_marks_nothing() {
        let mut pod = Pod::default();
        pod.metadata.labels = Some([("role".to_owned(), "backup".to_owned())].into());
        pod.metadata.annotations = Some([("cost".to_owned(), "-10".to_owned())].into());
        pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "x.io/ok".into(),
                status: "False".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let s = spec();
        assert_eq!(
            pod_marks(&pod, &[(&s, &state(ProbeState::Failed))]),
            PodMarks::default()
        );
        assert_eq!(
            pod_marks(&pod, &[(&s, &state(ProbeState::Unknown))]),
            PodMarks::default()
        );
        let m = pod_marks(&pod, &[(&s, &state(ProbeState::Succeeded))]);
        assert_eq!(m.conditions[0].status, "True");
    }
}
