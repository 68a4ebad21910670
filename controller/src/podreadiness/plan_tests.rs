use super::*;
use crate::workload::podutil::testpod::pod;
use k8s_openapi::api::core::v1::{PodCondition, PodReadinessGate};
use kruise_api::appspub::{PodReadinessMessage, kruise_pod_ready_condition};

fn gated() -> Pod {
    let mut p = pod("a").build();
    p.spec.get_or_insert_default().readiness_gates = Some(vec![PodReadinessGate {
        condition_type: keys::KRUISE_POD_READY.into(),
    }]);
    p
}

#[test]
fn only_gated_pods_without_the_condition() {
    assert!(!needs_condition(&pod("a").build()));
    assert!(needs_condition(&gated()));
    let with_cond = crate::workload::podutil::testpod::P(gated())
        .cond(keys::KRUISE_POD_READY, "False", 0)
        .build();
    assert!(!needs_condition(&with_cond));
    let mut deleting = gated();
    deleting.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    assert!(!needs_condition(&deleting));
}

#[test]
fn not_ready_keys() {
    use kruise_api::appspub::PodReadinessMessage;
    let msg = PodReadinessMessage::new(
        keys::READINESS_USER_AGENT_LIFECYCLE,
        keys::READINESS_KEY_PRE_UPDATE_HOOK,
    );
    let t = Timestamp::UNIX_EPOCH;
    assert!(
        kruise_pod_ready_condition(&pod("a").build(), &msg, true, t)
            .expect("ok")
            .is_none()
    );
    let held = kruise_pod_ready_condition(&gated(), &msg, true, t)
        .expect("ok")
        .expect("changed");
    assert_eq!(held.status, "False");
    assert!(
        held.message
            .as_deref()
            .is_some_and(|m| m.contains("preUpdateHook"))
    );
    let mut p = gated();
    p.status.get_or_insert_default().conditions = Some(vec![held]);
    assert!(
        kruise_pod_ready_condition(&p, &msg, true, t)
            .expect("ok")
            .is_none()
    );
    let freed = kruise_pod_ready_condition(&p, &msg, false, t)
        .expect("ok")
        .expect("changed");
    assert_eq!(freed.status, "True");
    assert_eq!(freed.message.as_deref(), Some("[]"));
}

/// (what, pod, add?, written (status, transition time) or nothing).
type Case<'a> = (&'a str, Pod, bool, Option<(&'a str, Timestamp)>);

/// Where the old hand-written write differed from upstream's `addNotReadyKey` /
/// `removeNotReadyKey`, upstream wins.
#[test]
fn not_ready_keys_follow_upstream() {
    use kruise_api::appspub::dump_readiness_messages;
    let a = PodReadinessMessage::new(keys::READINESS_USER_AGENT_LIFECYCLE, "a");
    let b = PodReadinessMessage::new(keys::READINESS_USER_AGENT_CRR, "b");
    let (then, now) = (
        Timestamp::UNIX_EPOCH,
        Timestamp::from_second(100).expect("ts"),
    );
    let with = |status: &str, held: &[PodReadinessMessage]| {
        let mut p = gated();
        p.status.get_or_insert_default().conditions = Some(vec![PodCondition {
            type_: keys::KRUISE_POD_READY.into(),
            status: status.into(),
            message: Some(dump_readiness_messages(held)),
            last_transition_time: Some(Time(then)),
            ..Default::default()
        }]);
        p
    };
    let cases: Vec<Case<'_>> = vec![
        // The old code flipped a True condition to False when its key was already listed.
        (
            "held key, True",
            with("True", std::slice::from_ref(&a)),
            true,
            None,
        ),
        // The old code kept the transition time when the status stayed False.
        (
            "second key",
            with("False", std::slice::from_ref(&b)),
            true,
            Some(("False", now)),
        ),
        // The old code wrote True on removal from a pod without the condition.
        ("remove, no condition", gated(), false, None),
        // The old code wrote True when the key to remove was not listed.
        ("remove absent key", with("False", &[]), false, None),
        // Another key stays: the status is left as it is.
        (
            "remove one of two",
            with("False", &[a.clone(), b.clone()]),
            false,
            Some(("False", now)),
        ),
    ];
    for (what, p, add, want) in cases {
        let got = kruise_pod_ready_condition(&p, &a, add, now).expect("readable");
        let got = got.as_ref().map(|c| {
            (
                c.status.as_str(),
                c.last_transition_time.as_ref().map_or(then, |t| t.0),
            )
        });
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn recent_claims_expire() {
    let r = Recent::default();
    let t0 = Instant::now();
    assert!(r.claim("a", t0));
    assert!(!r.claim("a", t0 + Duration::from_secs(1)));
    assert!(r.claim("b", t0));
    assert!(r.claim("a", t0 + RECENT + Duration::from_secs(1)));
}

#[test]
fn a_released_claim_is_retried_at_once() {
    let r = Recent::default();
    let t0 = Instant::now();
    assert!(r.claim("a", t0));
    assert!(r.claim("b", t0));
    // The patch of "a" failed: its retry must patch, while "b" (patched) stays claimed.
    r.release("a");
    assert!(r.claim("a", t0 + Duration::from_millis(5)));
    assert!(!r.claim("b", t0 + Duration::from_millis(5)));
    // Releasing what was never claimed is harmless.
    r.release("c");
    assert!(r.claim("c", t0));
}

#[test]
fn patch_shape() {
    let p = condition_patch(Timestamp::UNIX_EPOCH);
    assert_eq!(p["status"]["conditions"][0]["type"], keys::KRUISE_POD_READY);
    assert_eq!(p["status"]["conditions"][0]["status"], "True");
    assert_eq!(
        p["status"]["conditions"][0]["lastTransitionTime"],
        "1970-01-01T00:00:00Z"
    );
}
