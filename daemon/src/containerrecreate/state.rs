//! The daemon side of ContainerRecreateRequest as pure decisions: which request of a pod runs,
//! each container's recreate state, and the next thing to do.

use std::time::Duration;

use jiff::Timestamp;

use crate::apitypes::{
    ContainerRecreateRequest, ContainerRecreateRequestStrategy, ContainerRecreateState, CrrPhase,
    FailurePolicy,
};
use crate::criruntime::labels::{container_id_with_runtime, newest_by_name};
use crate::criruntime::{ContainerInfo, State};

fn phase_weight(phase: Option<CrrPhase>) -> u8 {
    match phase {
        Some(CrrPhase::Completed) => 1,
        Some(CrrPhase::Recreating) => 2,
        Some(CrrPhase::Pending) => 3,
        _ => 4,
    }
}

fn is_finished(crr: &ContainerRecreateRequest) -> bool {
    crr.metadata.deletion_timestamp.is_some()
        || crr
            .status
            .as_ref()
            .is_some_and(|s| s.completion_time.is_some())
}

/// `None` until someone (the daemon) first sets a phase.
pub fn phase(crr: &ContainerRecreateRequest) -> Option<CrrPhase> {
    crr.status.as_ref().map(|s| s.phase)
}

/// Of the active requests for one pod, the one to work on (a Recreating one first, then the
/// oldest Pending, then the oldest new one), plus the new ones that must be marked Pending.
pub fn pick<'a>(
    crrs: &[&'a ContainerRecreateRequest],
) -> (
    Option<&'a ContainerRecreateRequest>,
    Vec<&'a ContainerRecreateRequest>,
) {
    let mut live: Vec<&ContainerRecreateRequest> =
        crrs.iter().copied().filter(|c| !is_finished(c)).collect();
    live.sort_by(|a, b| {
        phase_weight(phase(a))
            .cmp(&phase_weight(phase(b)))
            .then_with(|| {
                let ta = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
                let tb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
                ta.cmp(&tb)
            })
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    let mut it = live.into_iter();
    let picked = it.next();
    let to_pend = it.filter(|c| phase(c).is_none()).collect();
    (picked, to_pend)
}

/// Where a request stands with respect to `unreadyGracePeriodSeconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnreadyGrace {
    /// No grace asked, or it has passed: go on.
    Done,
    /// The manager has not made the pod unready yet (no PreRecreateGrace condition).
    NotAcknowledged,
    /// The pod is unready; wait this much longer.
    Wait(Duration),
}

/// How long the request must still wait for the manager's unready grace.
pub fn unready_grace(crr: &ContainerRecreateRequest, now: Timestamp) -> UnreadyGrace {
    let Some(grace) = crr
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.unready_grace_period_seconds)
    else {
        return UnreadyGrace::Done;
    };
    let Some(since) = crr
        .status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .find(|c| {
            c.type_ == kruise_api::keys::CRR_CONDITION_PRE_RECREATE_GRACE
                && c.status == kruise_api::keys::k8s::CONDITION_TRUE
        })
        .map(|c| c.last_transition_time.0)
    else {
        return UnreadyGrace::NotAcknowledged;
    };
    let elapsed = now.duration_since(since).unsigned_abs();
    let want = Duration::from_secs(grace.max(0) as u64);
    match want.checked_sub(elapsed).filter(|d| !d.is_zero()) {
        Some(left) => UnreadyGrace::Wait(left),
        None => UnreadyGrace::Done,
    }
}

fn strategy(crr: &ContainerRecreateRequest) -> ContainerRecreateRequestStrategy {
    crr.spec.strategy.clone().unwrap_or_default()
}

/// Each requested container's state from what the runtime shows now. Finished states stay.
pub fn current_states(
    crr: &ContainerRecreateRequest,
    containers: &[ContainerInfo],
    runtime_name: &str,
    now: Timestamp,
) -> Vec<ContainerRecreateState> {
    let strat = strategy(crr);
    let min_started = Duration::from_secs(strat.min_started_seconds.max(0) as u64);
    let status = crr.status.clone().unwrap_or_default();
    let mut out = Vec::with_capacity(crr.spec.containers.len());
    for c in &crr.spec.containers {
        let prev = status
            .container_recreate_states
            .iter()
            .find(|s| s.name == c.name);
        if let Some(p) = prev
            && (p.phase == CrrPhase::Failed || p.phase == CrrPhase::Succeeded)
        {
            out.push(p.clone());
            continue;
        }
        let was_killed = prev.is_some_and(|p| p.is_killed);
        let state = |phase: CrrPhase, is_killed: bool, message: &str| ContainerRecreateState {
            name: c.name.clone(),
            phase,
            message: message.to_string(),
            is_killed,
        };
        let Some(rt) = newest_by_name(containers, &c.name) else {
            out.push(state(
                CrrPhase::Pending,
                was_killed,
                "not found container on Node",
            ));
            continue;
        };
        let full_id = container_id_with_runtime(runtime_name, &rt.id);
        let s = if rt.state == State::Exited {
            state(CrrPhase::Recreating, was_killed, "")
        } else if strat.force_recreate && !was_killed {
            // Force: recreate even if the container changed since the request was made.
            state(CrrPhase::Pending, false, "")
        } else if let Some(ctx) = c
            .status_context
            .as_ref()
            .filter(|ctx| full_id != ctx.container_id || rt.restart_count > ctx.restart_count)
        {
            let _ = ctx;
            let snapshot = status
                .container_status_snapshot
                .iter()
                .find(|s| s.name == c.name);
            let started = Timestamp::from_nanosecond(i128::from(rt.started_at)).unwrap_or(now);
            let running_for = now.duration_since(started);
            let done = snapshot.is_some_and(|s| s.container_id == full_id && s.ready)
                && running_for.is_positive()
                && running_for.unsigned_abs() > min_started;
            if done {
                state(CrrPhase::Succeeded, was_killed, "")
            } else {
                state(CrrPhase::Recreating, was_killed, "")
            }
        } else {
            state(CrrPhase::Pending, was_killed, "")
        };
        out.push(s);
    }
    out
}

/// What to do after the states are up to date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Stop this container (index into the states / spec containers).
    Kill(usize),
    /// Every container is finished, or one failed under failurePolicy Fail.
    Complete,
    /// Wait for the runtime or the manager to move.
    Wait,
}

/// Walks the containers in order. A Recreating container counts as killed; with
/// orderedRecreate the walk stops there until it is back. At most one kill per step.
pub fn next(
    crr: &ContainerRecreateRequest,
    states: &mut [ContainerRecreateState],
    containers: &[ContainerInfo],
) -> Next {
    let strat = strategy(crr);
    let ignore = strat.failure_policy == Some(FailurePolicy::Ignore);
    let mut completed = 0;
    let total = states.len();
    for (i, st) in states.iter_mut().enumerate() {
        match st.phase {
            CrrPhase::Succeeded => {
                completed += 1;
                continue;
            }
            CrrPhase::Failed => {
                completed += 1;
                if ignore {
                    continue;
                }
                return Next::Complete;
            }
            CrrPhase::Recreating => {
                st.is_killed = true;
                if strat.ordered_recreate {
                    break;
                }
                continue;
            }
            CrrPhase::Pending | CrrPhase::Completed => {}
        }
        if newest_by_name(containers, &st.name).is_none() {
            break;
        }
        return Next::Kill(i);
    }
    if completed == total {
        Next::Complete
    } else {
        Next::Wait
    }
}

/// Records the outcome of a kill in the states. Returns whether the walk may go on to the next
/// container in this step (a failed kill under failurePolicy Ignore).
pub fn record_kill(
    crr: &ContainerRecreateRequest,
    states: &mut [ContainerRecreateState],
    i: usize,
    result: Result<(), String>,
) -> bool {
    match result {
        Ok(()) => {
            states[i].is_killed = true;
            states[i].phase = CrrPhase::Recreating;
            false
        }
        Err(e) => {
            states[i].phase = CrrPhase::Failed;
            states[i].message = format!("kill container error: {e}");
            strategy(crr).failure_policy == Some(FailurePolicy::Ignore)
        }
    }
}

/// Grace for StopContainer: the request's terminationGracePeriodSeconds, else 30 s.
pub fn grace_seconds(crr: &ContainerRecreateRequest) -> i64 {
    crr.spec
        .strategy
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apitypes::{
        ContainerRecreateRequestContainer, ContainerRecreateRequestContainerContext,
        ContainerRecreateRequestSpec, ContainerRecreateRequestStatus, SyncContainerStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    const T0: i64 = 1_700_000_000;

    fn ts(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn rt(name: &str, id: &str, state: State, restarts: i32, started: i64) -> ContainerInfo {
        ContainerInfo {
            id: id.into(),
            name: name.into(),
            pod_uid: "u".into(),
            pod_name: "p".into(),
            pod_namespace: "ns".into(),
            hash: 0,
            restart_count: restarts,
            state,
            created_at: started * 1_000_000_000,
            started_at: started * 1_000_000_000,
            image_ref: String::new(),
            pod_sandbox_id: String::new(),
            grace_seconds: None,
            pre_stop: None,
            ports: vec![],
        }
    }

    fn crr(names: &[&str], strat: ContainerRecreateRequestStrategy) -> ContainerRecreateRequest {
        let mut c = ContainerRecreateRequest::new(
            "r",
            ContainerRecreateRequestSpec {
                pod_name: "p".into(),
                containers: names
                    .iter()
                    .map(|n| ContainerRecreateRequestContainer {
                        name: n.to_string(),
                        status_context: Some(ContainerRecreateRequestContainerContext {
                            container_id: format!("containerd://{n}-1"),
                            restart_count: 0,
                        }),
                        ..Default::default()
                    })
                    .collect(),
                strategy: Some(strat),
                ..Default::default()
            },
        );
        c.status = Some(ContainerRecreateRequestStatus {
            phase: CrrPhase::Recreating,
            ..Default::default()
        });
        c
    }

    fn phases(s: &[ContainerRecreateState]) -> Vec<String> {
        s.iter().map(|s| format!("{:?}", s.phase)).collect()
    }

    #[test]
    fn untouched_containers_are_pending_and_the_first_is_killed() {
        let r = crr(&["a", "b"], Default::default());
        let cs = vec![
            rt("a", "a-1", State::Running, 0, T0),
            rt("b", "b-1", State::Running, 0, T0),
        ];
        let mut st = current_states(&r, &cs, "containerd", ts(T0 + 5));
        assert_eq!(phases(&st), vec!["Pending", "Pending"]);
        assert_eq!(next(&r, &mut st, &cs), Next::Kill(0));
        assert!(!record_kill(&r, &mut st, 0, Ok(())));
        assert_eq!(phases(&st), vec!["Recreating", "Pending"]);
        assert!(st[0].is_killed);
    }

    #[test]
    fn unordered_moves_on_while_ordered_waits() {
        let mut r = crr(&["a", "b"], Default::default());
        r.status.as_mut().unwrap().container_recreate_states = vec![
            ContainerRecreateState {
                name: "a".into(),
                phase: CrrPhase::Recreating,
                is_killed: true,
                ..Default::default()
            },
            ContainerRecreateState {
                name: "b".into(),
                phase: CrrPhase::Pending,
                ..Default::default()
            },
        ];
        // a was stopped and is being restarted by the kubelet (exited state).
        let cs = vec![
            rt("a", "a-1", State::Exited, 0, T0),
            rt("b", "b-1", State::Running, 0, T0),
        ];
        let mut st = current_states(&r, &cs, "containerd", ts(T0 + 5));
        assert_eq!(phases(&st), vec!["Recreating", "Pending"]);
        assert_eq!(next(&r, &mut st.clone(), &cs), Next::Kill(1));

        r.spec.strategy.as_mut().unwrap().ordered_recreate = true;
        assert_eq!(next(&r, &mut st, &cs), Next::Wait);
    }

    #[test]
    fn new_container_succeeds_only_when_ready_in_snapshot_and_started_long_enough() {
        let mut r = crr(
            &["a"],
            ContainerRecreateRequestStrategy {
                min_started_seconds: 10,
                ..Default::default()
            },
        );
        r.status.as_mut().unwrap().container_recreate_states = vec![ContainerRecreateState {
            name: "a".into(),
            phase: CrrPhase::Recreating,
            is_killed: true,
            ..Default::default()
        }];
        let cs = vec![rt("a", "a-2", State::Running, 1, T0)];
        // No snapshot from the manager yet.
        let st = current_states(&r, &cs, "containerd", ts(T0 + 60));
        assert_eq!(phases(&st), vec!["Recreating"]);
        r.status.as_mut().unwrap().container_status_snapshot = vec![SyncContainerStatus {
            name: "a".into(),
            ready: true,
            restart_count: 1,
            container_id: "containerd://a-2".into(),
        }];
        // Ready but not running for minStartedSeconds yet.
        let st = current_states(&r, &cs, "containerd", ts(T0 + 5));
        assert_eq!(phases(&st), vec!["Recreating"]);
        let mut st = current_states(&r, &cs, "containerd", ts(T0 + 11));
        assert_eq!(phases(&st), vec!["Succeeded"]);
        assert!(st[0].is_killed);
        assert_eq!(next(&r, &mut st, &cs), Next::Complete);
    }

    #[test]
    fn force_recreate_kills_even_a_changed_container_once() {
        let r = crr(
            &["a"],
            ContainerRecreateRequestStrategy {
                force_recreate: true,
                ..Default::default()
            },
        );
        // Container already differs from statusContext (restarted by itself).
        let cs = vec![rt("a", "a-9", State::Running, 3, T0)];
        let mut st = current_states(&r, &cs, "containerd", ts(T0 + 1));
        assert_eq!(phases(&st), vec!["Pending"]);
        assert_eq!(next(&r, &mut st, &cs), Next::Kill(0));
        // Without force it would be treated as recreated already.
        let r2 = crr(&["a"], Default::default());
        assert_eq!(
            phases(&current_states(&r2, &cs, "containerd", ts(T0 + 1))),
            vec!["Recreating"]
        );
    }

    #[test]
    fn failures_complete_unless_ignored() {
        let r = crr(&["a", "b"], Default::default());
        let cs = vec![
            rt("a", "a-1", State::Running, 0, T0),
            rt("b", "b-1", State::Running, 0, T0),
        ];
        let mut st = current_states(&r, &cs, "containerd", ts(T0));
        assert!(!record_kill(&r, &mut st, 0, Err("boom".into())));
        assert_eq!(st[0].message, "kill container error: boom");
        assert_eq!(next(&r, &mut st, &cs), Next::Complete);

        let ri = crr(
            &["a", "b"],
            ContainerRecreateRequestStrategy {
                failure_policy: Some(FailurePolicy::Ignore),
                ..Default::default()
            },
        );
        let mut st = current_states(&ri, &cs, "containerd", ts(T0));
        assert!(record_kill(&ri, &mut st, 0, Err("boom".into())));
        assert_eq!(next(&ri, &mut st, &cs), Next::Kill(1));
    }

    #[test]
    fn missing_container_is_pending_and_blocks() {
        let r = crr(&["a"], Default::default());
        let mut st = current_states(&r, &[], "containerd", ts(T0));
        assert_eq!(st[0].message, "not found container on Node");
        assert_eq!(next(&r, &mut st, &[]), Next::Wait);
    }

    #[test]
    fn pick_prefers_recreating_then_oldest_and_pends_new_ones() {
        let mk = |name: &str, phase: Option<CrrPhase>, created: i64| {
            let mut c = crr(&["a"], Default::default());
            c.metadata.name = Some(name.into());
            c.metadata.creation_timestamp = Some(Time(ts(created)));
            match phase {
                Some(p) => c.status.as_mut().unwrap().phase = p,
                None => c.status = None,
            }
            c
        };
        let a = mk("a", None, 1);
        let b = mk("b", Some(CrrPhase::Recreating), 5);
        let c = mk("c", None, 3);
        let mut d = mk("d", Some(CrrPhase::Recreating), 0);
        d.status.as_mut().unwrap().completion_time = Some(Time(ts(9)));
        let (p, pend) = pick(&[&a, &b, &c, &d]);
        assert_eq!(
            p.and_then(|p| p.metadata.name.clone()).as_deref(),
            Some("b")
        );
        let names: Vec<_> = pend
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        assert_eq!(names, vec!["a", "c"]);
        let (p, _) = pick(&[&a, &c]);
        assert_eq!(
            p.and_then(|p| p.metadata.name.clone()).as_deref(),
            Some("a")
        );
    }

    #[test]
    fn unready_grace_waits_for_the_manager_then_the_clock() {
        let mut r = crr(
            &["a"],
            ContainerRecreateRequestStrategy {
                unready_grace_period_seconds: Some(10),
                ..Default::default()
            },
        );
        assert_eq!(unready_grace(&r, ts(T0)), UnreadyGrace::NotAcknowledged);
        r.status.as_mut().unwrap().conditions = vec![Condition {
            type_: kruise_api::keys::CRR_CONDITION_PRE_RECREATE_GRACE.into(),
            status: "True".into(),
            last_transition_time: Time(ts(T0)),
            message: String::new(),
            reason: "PreRecreateGrace".into(),
            observed_generation: None,
        }];
        assert_eq!(
            unready_grace(&r, ts(T0 + 4)),
            UnreadyGrace::Wait(Duration::from_secs(6))
        );
        assert_eq!(unready_grace(&r, ts(T0 + 10)), UnreadyGrace::Done);
        let plain = crr(&["a"], Default::default());
        assert_eq!(unready_grace(&plain, ts(T0)), UnreadyGrace::Done);
    }

    #[test]
    fn grace_defaults_to_30() {
        assert_eq!(grace_seconds(&crr(&["a"], Default::default())), 30);
        let r = crr(
            &["a"],
            ContainerRecreateRequestStrategy {
                termination_grace_period_seconds: Some(3),
                ..Default::default()
            },
        );
        assert_eq!(grace_seconds(&r), 3);
    }
}
