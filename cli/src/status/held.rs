//! Why a rollout is not progressing: for each Pod it waits on, the one reason that holds it and
//! what to do about it. Pure, from the views `rollout status` already has.

use std::collections::BTreeMap;

use crate::math;
use crate::view::verdict::Held;
use crate::view::{PodView, RolloutView};

/// What a PodUnavailableBudget allows now, for the Pods it covers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Budget {
    /// `status.unavailableAllowed`.
    pub allowed: i32,
    /// `status.unavailablePods` and `status.disruptedPods`: the Pods that use it up.
    pub using: Vec<String>,
}

/// Budgets by name, in the namespace of the rollout's Pods.
pub type Budgets = BTreeMap<String, Budget>;

/// What the command reads once it concludes without the rollout done (empty while watching).
#[derive(Debug, Clone, Default)]
pub struct Reads {
    /// The PodUnavailableBudgets the Pods name.
    pub budgets: Budgets,
    /// Image pull failures the kubelet's Events report now, by (Pod, container): the message.
    pub pulls: BTreeMap<(String, String), String>,
}

/// Container waiting reasons that mean the image cannot be had.
const IMAGE_ERRORS: [&str; 5] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "RegistryUnavailable",
];

/// Lifecycle states in which a Pod waits for its hook's owner (`lifecycle.apps.kruise.io/state`).
const HOOK_STATES: [&str; 2] = ["PreparingUpdate", "PreparingDelete"];

/// The Pods the rollout waits on (not updated, or updated and not ready), each with its reason;
/// at most `limit`, in name order.
/// `reads` holds what is read only once the command concludes (empty while watching).
pub fn held(view: &RolloutView, pods: &[PodView], limit: usize, reads: &Reads) -> Vec<Held> {
    let mut pods: Vec<&PodView> = pods.iter().filter(|p| !p.terminating).collect();
    pods.sort_by(|a, b| a.name.cmp(&b.name));
    let updated = |p: &PodView| p.is_updated(&view.update_revision);
    let unready: Vec<&str> = pods
        .iter()
        .filter(|p| !p.ready)
        .map(|p| p.name.as_str())
        .collect();
    let old = pods.iter().filter(|p| !updated(p)).count() as i64;
    let kept = math::partition_pods(view.partition.as_ref(), view.replicas);
    pods.iter()
        .filter(|p| !updated(p) || !p.ready)
        .filter_map(|p| {
            let reason = reason(view, p, updated(p), old <= kept, &unready, reads)?;
            Some(Held {
                pod: p.name.clone(),
                reason,
            })
        })
        .take(limit)
        .collect()
}

fn reason(
    view: &RolloutView,
    p: &PodView,
    updated: bool,
    partition_holds: bool,
    unready: &[&str],
    reads: &Reads,
) -> Option<String> {
    for c in &p.containers {
        let Some((why, message)) = &c.waiting else {
            continue;
        };
        // Between pull back-offs the kubelet may show CrashLoopBackOff (see
        // `view::events::pull_failure`); its Events tell.
        let pull = reads.pulls.get(&(p.name.clone(), c.name.clone()));
        if IMAGE_ERRORS.contains(&why.as_str()) || (why == "CrashLoopBackOff" && pull.is_some()) {
            let (why, message) = match pull {
                Some(m) if !IMAGE_ERRORS.contains(&why.as_str()) => ("ErrImagePull", m),
                _ => (why.as_str(), message),
            };
            return Some(format!(
                "image {} of container {} cannot be pulled ({why}{}): fix the image reference or its pull secret",
                c.spec_image,
                c.name,
                if message.is_empty() {
                    String::new()
                } else {
                    format!(": {message}")
                }
            ));
        }
        if why == "CrashLoopBackOff" {
            return Some(format!(
                "container {} is crash-looping ({} restarts): see `kubectl logs --previous {} -c {}`",
                c.name, c.restarts, p.name, c.name
            ));
        }
    }
    if HOOK_STATES.contains(&p.lifecycle.as_str()) {
        return Some(format!(
            "held by a lifecycle hook (state {}): whoever set the hook's label or finalizer must \
             release it",
            p.lifecycle
        ));
    }
    if updated {
        if p.in_place_in_progress() {
            return Some(in_place_step(p));
        }
        return Some(
            "updated but not ready: its readiness probe or a readiness gate is not passing \
             (`kubectl describe pod`)"
                .to_owned(),
        );
    }
    if view.paused {
        return Some("the rollout is paused: `rollout resume` lets it go on".to_owned());
    }
    if partition_holds {
        return Some(
            "kept on the old revision by the partition: `rollout promote` moves it on".to_owned(),
        );
    }
    if !p.ready {
        return Some(
            "not ready on the old revision: it uses the rollout's unavailability budget \
             (`kubectl describe pod`)"
                .to_owned(),
        );
    }
    // A ready Pod on the old revision whose budget allows no disruption: the manager charges an
    // in-place update to the budget first and is refused (a `PubPreventPodDeletion` Event).
    if let Some((name, b)) = p
        .budget
        .as_ref()
        .and_then(|n| reads.budgets.get(n).map(|b| (n, b)))
        .filter(|(_, b)| b.allowed <= 0)
    {
        return Some(format!(
            "its update is refused by PodUnavailableBudget {name} (unavailableAllowed {}{}): wait \
             for those Pods to be available again, or raise the budget's maxUnavailable",
            b.allowed,
            if b.using.is_empty() {
                String::new()
            } else {
                format!("; used by {}", b.using.join(", "))
            }
        ));
    }
    let others: Vec<&str> = unready
        .iter()
        .copied()
        .filter(|n| *n != p.name)
        .take(3)
        .collect();
    Some(if others.is_empty() {
        "waiting for its turn".to_owned()
    } else {
        format!(
            "waiting for its turn: maxUnavailable is taken by unready {}",
            others.join(", ")
        )
    })
}

/// Which step of an in-place update a Pod is at, and what it waits for.
fn in_place_step(p: &PodView) -> String {
    let Some(ip) = &p.inplace else {
        return "updating in place".to_owned();
    };
    if ip.grace_seconds > 0 {
        return format!(
            "updating in place: not ready on purpose for the {} s of \
             inPlaceUpdateStrategy.gracePeriodSeconds before its containers restart",
            ip.grace_seconds
        );
    }
    if !ip.next_batch.is_empty() {
        return format!(
            "updating in place: containers {} wait for {} to start and be ready (container \
             launch priority)",
            ip.next_batch.join(", "),
            if ip.waiting_on.is_empty() {
                "the earlier batch".to_owned()
            } else {
                ip.waiting_on.join(", ")
            }
        );
    }
    let restarting: Vec<&str> = p
        .containers
        .iter()
        .filter(|c| !c.status_image.is_empty() && !c.runtime_has_spec_image())
        .map(|c| c.name.as_str())
        .collect();
    if !restarting.is_empty() {
        return format!(
            "updating in place: the node still reports the old image for {} (the kubelet is \
             restarting it; if this lasts, check the kubelet and kruise-daemon on {})",
            restarting.join(", "),
            if p.node.is_empty() {
                "its node"
            } else {
                &p.node
            }
        );
    }
    "updating in place: restarted, waiting for the manager to mark it InPlaceUpdateReady".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::ContainerView;
    use serde_json::json;

    fn view(extra: serde_json::Value) -> RolloutView {
        let mut obj = json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
            "metadata": {"name": "web", "generation": 2},
            "spec": {"replicas": 3, "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}},
                     "template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}},
            "status": {"observedGeneration": 2, "updateRevision": "web-2", "currentRevision": "web-1"}
        });
        if let (Some(s), Some(e)) = (obj["spec"].as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        RolloutView::from_json(&obj)
    }

    fn pod(name: &str, revision: &str, ready: bool, waiting: Option<(&str, &str)>) -> PodView {
        PodView {
            name: name.into(),
            revision: revision.into(),
            ready,
            containers: vec![ContainerView {
                name: "app".into(),
                spec_image: "app:2".into(),
                restarts: 4,
                waiting: waiting.map(|(r, m)| (r.into(), m.into())),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn each_cause_is_named_with_what_to_do() {
        let v = view(json!({}));
        let pods = [
            pod(
                "web-a",
                "web-2",
                false,
                Some(("ImagePullBackOff", "Back-off pulling image")),
            ),
            pod("web-b", "web-2", false, Some(("CrashLoopBackOff", ""))),
            pod("web-c", "web-1", true, None),
            pod("web-d", "web-2", true, None),
        ];
        let h = held(&v, &pods, 10, &Reads::default());
        assert_eq!(h.len(), 3, "{h:?}");
        assert!(
            h[0].reason
                .contains("app:2 of container app cannot be pulled (ImagePullBackOff: Back-off"),
            "{h:?}"
        );
        assert!(
            h[1].reason.contains("crash-looping (4 restarts)")
                && h[1].reason.contains("--previous web-b"),
            "{h:?}"
        );
        assert_eq!(h[2].pod, "web-c");
        assert!(
            h[2].reason
                .contains("maxUnavailable is taken by unready web-a, web-b"),
            "{h:?}"
        );
        assert_eq!(held(&v, &pods, 1, &Reads::default()).len(), 1, "limited");
    }

    #[test]
    fn partition_pause_and_hooks() {
        let old = [
            pod("web-a", "web-1", true, None),
            pod("web-b", "web-2", true, None),
        ];
        let h = held(
            &view(
                json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "partition": 1}}}),
            ),
            &old,
            10,
            &Reads::default(),
        );
        assert!(h[0].reason.contains("by the partition"), "{h:?}");
        let h = held(
            &view(
                json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "paused": true}}}),
            ),
            &old,
            10,
            &Reads::default(),
        );
        assert!(h[0].reason.contains("paused"), "{h:?}");
        let mut hooked = pod("web-a", "web-1", true, None);
        hooked.lifecycle = "PreparingUpdate".into();
        let h = held(&view(json!({})), &[hooked], 10, &Reads::default());
        assert!(
            h[0].reason
                .contains("lifecycle hook (state PreparingUpdate)"),
            "{h:?}"
        );
        let h = held(
            &view(json!({})),
            &[pod("web-a", "web-2", false, None)],
            10,
            &Reads::default(),
        );
        assert!(
            h[0].reason.contains("readiness probe or a readiness gate"),
            "{h:?}"
        );
    }

    #[test]
    fn a_budget_that_allows_nothing_holds_a_ready_old_pod() {
        let v = view(json!({}));
        let mut a = pod("web-a", "web-1", true, None);
        a.budget = Some("pub".into());
        let mut reads = Reads::default();
        reads.budgets.insert(
            "pub".into(),
            Budget {
                allowed: 0,
                using: vec!["web-b".into()],
            },
        );
        let h = held(&v, std::slice::from_ref(&a), 10, &reads);
        assert!(
            h[0].reason.contains(
                "refused by PodUnavailableBudget pub (unavailableAllowed 0; used by web-b)"
            ),
            "{h:?}"
        );
        // Room in the budget, or no budget read: the usual reason.
        if let Some(b) = reads.budgets.get_mut("pub") {
            b.allowed = 1;
        }
        let h = held(&v, std::slice::from_ref(&a), 10, &reads);
        assert!(h[0].reason.starts_with("waiting for its turn"), "{h:?}");
        let h = held(&v, std::slice::from_ref(&a), 10, &Reads::default());
        assert!(h[0].reason.starts_with("waiting for its turn"), "{h:?}");
    }

    #[test]
    fn a_crash_loop_the_events_show_as_a_pull_failure_is_named_as_one() {
        let v = view(json!({}));
        let p = pod(
            "web-a",
            "web-2",
            false,
            Some((
                "CrashLoopBackOff",
                "back-off 10s restarting failed container",
            )),
        );
        let h = held(&v, std::slice::from_ref(&p), 10, &Reads::default());
        assert!(h[0].reason.contains("is crash-looping"), "{h:?}");
        let mut reads = Reads::default();
        reads.pulls.insert(
            ("web-a".into(), "app".into()),
            "Failed to pull image \"app:2\": not found".into(),
        );
        let h = held(&v, std::slice::from_ref(&p), 10, &reads);
        assert_eq!(
            h[0].reason,
            "image app:2 of container app cannot be pulled (ErrImagePull: Failed to pull image \"app:2\": not found): fix the image reference or its pull secret"
        );
    }

    #[test]
    fn in_place_steps_say_what_they_wait_for() {
        use crate::view::InPlaceProgress;
        let v = view(json!({}));
        let mut p = pod("web-a", "web-2", false, None);
        p.node = "n1".into();
        p.inplace = Some(InPlaceProgress {
            revision: "web-2".into(),
            grace_seconds: 10,
            ..Default::default()
        });
        let reason = |p: &PodView| {
            held(&v, std::slice::from_ref(p), 1, &Reads::default())[0]
                .reason
                .clone()
        };
        assert!(reason(&p).contains("10 s of inPlaceUpdateStrategy.gracePeriodSeconds"));
        p.inplace = Some(InPlaceProgress {
            revision: "web-2".into(),
            next_batch: vec!["app".into()],
            waiting_on: vec!["sidecar".into()],
            ..Default::default()
        });
        assert!(
            reason(&p).contains("containers app wait for sidecar to start"),
            "{}",
            reason(&p)
        );
        p.inplace = Some(InPlaceProgress {
            revision: "web-2".into(),
            ..Default::default()
        });
        p.containers[0].status_image = "app:1".into();
        assert!(
            reason(&p).contains("old image for app") && reason(&p).contains("on n1"),
            "{}",
            reason(&p)
        );
        p.containers[0].status_image = "app:2".into();
        p.inplace_ready = Some(false);
        assert!(reason(&p).contains("InPlaceUpdateReady"), "{}", reason(&p));
    }
}
