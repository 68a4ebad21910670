//! PodProbeMarker on serverless Pods (gate `EnablePodProbeMarkerOnServerless`; upstream
//! `getMatchingPods` and `markServerlessPod`). A Pod on a virtual-kubelet node has no
//! kruise-daemon beside it: the Pod webhook wrote the probes into its `kruise.io/podprobe`
//! annotation, the node's own agent runs them and reports each result as the Pod condition the
//! probe names, and the manager turns those conditions into the markers' labels and annotations.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::apps::v1alpha1::{PodProbeMarker, ProbeMarkerPolicy, ProbeState};
use kruise_api::keys;
use serde_json::{Map, Value, json};

use super::plan;

/// Whether `node` is a virtual-kubelet (serverless) node: it gets no NodePodProbe, and its
/// Pods are marked from their conditions instead.
pub fn is_serverless(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .is_some_and(keys::is_virtual_kubelet)
}

fn condition_status<'a>(pod: &'a Pod, ty: &str) -> Option<&'a str> {
    kruise_api::pod::condition(pod, ty).map(|c| c.status.as_str())
}

/// Whether the marker handles `pod` as upstream's `getMatchingPods` does: active, bound and
/// `Initialized` (the node's agent reports only from then on).
pub fn matched(ppm: &PodProbeMarker, pod: &Pod) -> bool {
    plan::selects(ppm, pod)
        && plan::probed_node(pod).is_some()
        && condition_status(pod, keys::k8s::POD_INITIALIZED) == Some("True")
}

/// The probe state a condition status stands for (upstream `IsEqualPodConditionStatus`).
fn state_of(status: &str) -> ProbeState {
    match status {
        "True" => ProbeState::Succeeded,
        "False" => ProbeState::Failed,
        _ => ProbeState::Unknown,
    }
}

/// The merge patch of `metadata` that marks `pod` from its conditions, or `None` when it is
/// marked already. Each probe with a condition type and a marker policy contributes the
/// labels and annotations of the policies whose state the condition's status stands for; a
/// later probe naming the same condition type replaces an earlier one, and a Pod without the
/// condition gets nothing for it. Keys are only added or changed, never removed: upstream's
/// serverless path does not take off the other state's markers.
pub fn marks(ppm: &PodProbeMarker, pod: &Pod) -> Option<Value> {
    let mut policies: BTreeMap<&str, &[ProbeMarkerPolicy]> = BTreeMap::new();
    for probe in &ppm.spec.probes {
        if !probe.pod_condition_type.is_empty() && !probe.marker_policy.is_empty() {
            policies.insert(&probe.pod_condition_type, &probe.marker_policy);
        }
    }
    let mut labels = BTreeMap::new();
    let mut annotations = BTreeMap::new();
    for (ty, policy) in policies {
        let Some(status) = condition_status(pod, ty) else {
            continue;
        };
        for p in policy.iter().filter(|p| p.state == state_of(status)) {
            labels.extend(p.labels.iter());
            annotations.extend(p.annotations.iter());
        }
    }
    let changed = |want: BTreeMap<&String, &String>, have: Option<&BTreeMap<String, String>>| {
        want.into_iter()
            .filter(|(k, v)| have.and_then(|h| h.get(*k)) != Some(*v))
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect::<Map<String, Value>>()
    };
    let labels = changed(labels, pod.metadata.labels.as_ref());
    let annotations = changed(annotations, pod.metadata.annotations.as_ref());
    let mut meta = Map::new();
    if !labels.is_empty() {
        meta.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), Value::Object(annotations));
    }
    (!meta.is_empty()).then(|| json!({ "metadata": meta }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use kruise_api::apps::v1alpha1::{PodContainerProbe, PodProbeMarkerSpec};

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn policy(
        state: ProbeState,
        labels: &[(&str, &str)],
        ann: &[(&str, &str)],
    ) -> ProbeMarkerPolicy {
        ProbeMarkerPolicy {
            state,
            labels: map(labels),
            annotations: map(ann),
        }
    }

    fn probe(name: &str, condition: &str, policies: Vec<ProbeMarkerPolicy>) -> PodContainerProbe {
        PodContainerProbe {
            name: name.into(),
            container_name: "main".into(),
            pod_condition_type: condition.into(),
            marker_policy: policies,
            ..Default::default()
        }
    }

    fn marker(probes: Vec<PodContainerProbe>) -> PodProbeMarker {
        let mut m = PodProbeMarker::new(
            "m",
            PodProbeMarkerSpec {
                selector: LabelSelector {
                    match_labels: Some(map(&[("app", "web")])),
                    ..Default::default()
                },
                probes,
            },
        );
        m.metadata.namespace = Some("ns".into());
        m
    }

    fn pod(conditions: &[(&str, &str)]) -> Pod {
        let mut p = Pod::default();
        p.metadata.namespace = Some("ns".into());
        p.metadata.labels = Some(map(&[("app", "web")]));
        p.metadata.annotations = Some(map(&[("app", "web")]));
        p.spec = Some(PodSpec {
            node_name: Some("vk".into()),
            ..Default::default()
        });
        p.status = Some(PodStatus {
            conditions: Some(
                conditions
                    .iter()
                    .map(|(t, s)| PodCondition {
                        type_: (*t).into(),
                        status: (*s).into(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        });
        p
    }

    /// Upstream's `TestMarkerServerlessPod` "probe success": each condition picks the policy of
    /// its state; the Pod's other labels and annotations stay.
    fn game_marker() -> PodProbeMarker {
        use ProbeState::{Failed, Succeeded};
        marker(vec![
            probe(
                "idle",
                "game.io/idle",
                vec![
                    policy(
                        Succeeded,
                        &[("gameserver-idle", "true")],
                        &[("controller.kubernetes.io/pod-deletion-cost", "-10")],
                    ),
                    policy(
                        Failed,
                        &[("gameserver-idle", "false")],
                        &[("controller.kubernetes.io/pod-deletion-cost", "10")],
                    ),
                ],
            ),
            probe(
                "healthy",
                "game.io/healthy",
                vec![
                    policy(
                        Succeeded,
                        &[("gameserver-healthy", "true")],
                        &[("controller.kubernetes.io/ingress", "true")],
                    ),
                    policy(
                        Failed,
                        &[("gameserver-healthy", "false")],
                        &[("controller.kubernetes.io/ingress", "false")],
                    ),
                ],
            ),
        ])
    }

    #[test]
    fn conditions_pick_the_policy_of_their_state() {
        let p = pod(&[
            ("Initialized", "True"),
            ("game.io/idle", "True"),
            ("game.io/healthy", "False"),
        ]);
        assert_eq!(
            marks(&game_marker(), &p),
            Some(json!({"metadata": {
                "labels": {"gameserver-healthy": "false", "gameserver-idle": "true"},
                "annotations": {"controller.kubernetes.io/ingress": "false",
                    "controller.kubernetes.io/pod-deletion-cost": "-10"}}}))
        );
    }

    #[test]
    fn a_marked_pod_needs_nothing_and_the_other_states_keys_stay() {
        let mut p = pod(&[("game.io/idle", "False")]);
        p.metadata.labels = Some(map(&[("app", "web"), ("gameserver-idle", "false")]));
        p.metadata.annotations = Some(map(&[
            ("controller.kubernetes.io/pod-deletion-cost", "10"),
            ("controller.kubernetes.io/ingress", "true"),
        ]));
        assert_eq!(marks(&game_marker(), &p), None, "healthy has no condition");
        // Upstream adds and overwrites, never removes: healthy's Succeeded key is not taken off
        // when the condition turns False; its Failed value replaces it.
        let mut p2 = p.clone();
        if let Some(c) = p2.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            c.push(PodCondition {
                type_: "game.io/healthy".into(),
                status: "False".into(),
                ..Default::default()
            });
        }
        assert_eq!(
            marks(&game_marker(), &p2),
            Some(json!({"metadata": {
                "labels": {"gameserver-healthy": "false"},
                "annotations": {"controller.kubernetes.io/ingress": "false"}}}))
        );
    }

    #[test]
    fn unknown_status_picks_the_unknown_policy_and_probes_without_policy_mark_nothing() {
        let m = marker(vec![
            probe(
                "a",
                "x.io/a",
                vec![policy(ProbeState::Unknown, &[("a", "unknown")], &[])],
            ),
            probe("b", "x.io/b", vec![]),
            probe(
                "c",
                "",
                vec![policy(ProbeState::Succeeded, &[("c", "y")], &[])],
            ),
        ]);
        let p = pod(&[("x.io/a", "Unknown"), ("x.io/b", "True")]);
        assert_eq!(
            marks(&m, &p),
            Some(json!({"metadata": {"labels": {"a": "unknown"}}}))
        );
    }

    #[test]
    fn a_later_probe_on_the_same_condition_replaces_the_earlier() {
        let m = marker(vec![
            probe(
                "first",
                "x.io/c",
                vec![policy(ProbeState::Succeeded, &[("first", "y")], &[])],
            ),
            probe(
                "second",
                "x.io/c",
                vec![policy(ProbeState::Succeeded, &[("second", "y")], &[])],
            ),
        ]);
        assert_eq!(
            marks(&m, &pod(&[("x.io/c", "True")])),
            Some(json!({"metadata": {"labels": {"second": "y"}}}))
        );
    }

    #[test]
    fn only_initialized_active_bound_selected_pods_are_matched() {
        let m = game_marker();
        assert!(matched(&m, &pod(&[("Initialized", "True")])));
        assert!(!matched(&m, &pod(&[("Initialized", "False")])));
        assert!(!matched(&m, &pod(&[])));
        let mut done = pod(&[("Initialized", "True")]);
        if let Some(s) = done.status.as_mut() {
            s.phase = Some("Succeeded".into());
        }
        assert!(!matched(&m, &done));
        let mut other = pod(&[("Initialized", "True")]);
        other.metadata.labels = Some(map(&[("app", "db")]));
        assert!(!matched(&m, &other));
    }

    #[test]
    fn a_node_is_serverless_by_upstreams_label() {
        let mut n = Node::default();
        assert!(!is_serverless(&n));
        n.metadata.labels = Some(map(&[("type", "kwok")]));
        assert!(!is_serverless(&n));
        n.metadata.labels = Some(map(&[("type", "virtual-kubelet")]));
        assert!(is_serverless(&n));
    }
}
