use jiff::Timestamp;
use proptest::prelude::*;

use super::*;
use crate::apps::v1alpha1::{
    EphemeralJobCondition, EphemeralJobConditionType, WorkloadSpreadSubsetCondition,
};
use crate::apps::v1beta1::{
    CloneSetCondition, ResourceDistributionCondition, UnitedDeploymentCondition,
    UnitedDeploymentSubsetCondition,
};

fn at(s: i64) -> Option<Time> {
    Some(Time(Timestamp::from_second(s).expect("timestamp")))
}

fn cs(type_: &str, status: &str, reason: &str, message: &str, t: i64) -> CloneSetCondition {
    CloneSetCondition {
        type_: type_.into(),
        status: status.into(),
        last_update_time: at(t),
        last_transition_time: at(t),
        reason: reason.into(),
        message: message.into(),
    }
}

#[test]
fn upstream_rules_keep_the_transition_time_and_move_the_condition_last() {
    let mut l = vec![cs("A", "True", "r", "", 0), cs("B", "True", "r", "", 0)];
    assert!(!set(&mut l, cs("A", "True", "r", "", 5)), "same: no change");
    assert_eq!(l[0].last_update_time, at(0));
    assert!(set(&mut l, cs("A", "True", "r", "new message", 5)));
    assert_eq!(
        (l[1].type_.as_str(), l[1].last_transition_time.clone()),
        ("A", at(0))
    );
    assert_eq!(l[1].last_update_time(), at(5).as_ref());
    assert!(set(&mut l, cs("A", "False", "r", "", 9)));
    assert_eq!(l[1].last_transition_time, at(9));
    assert_eq!(l.len(), 2);
    remove(&mut l, "A");
    assert_eq!(l.len(), 1);
    assert!(is_true(&l, "B") && !is_true(&l, "A"));
    assert!(get(&l, "B").is_some() && get(&l, "A").is_none());
}

#[test]
fn united_deployment_ignores_a_new_message() {
    let c = |m: &str| UnitedDeploymentCondition {
        type_: "Updated".into(),
        status: "True".into(),
        reason: "r".into(),
        message: m.into(),
        ..Default::default()
    };
    let mut l = vec![c("a")];
    assert!(!set(&mut l, c("b")));
    assert_eq!(l[0].message, "a");
}

#[test]
fn subset_conditions_are_rewritten_in_place() {
    let ud = |type_: &str, reason: &str, t: i64| UnitedDeploymentSubsetCondition {
        type_: type_.into(),
        status: "False".into(),
        last_transition_time: at(t),
        reason: reason.into(),
        message: String::new(),
    };
    let mut l = vec![ud("Schedulable", "a", 0), ud("Other", "a", 0)];
    assert!(set(&mut l, ud("Schedulable", "b", 7)));
    assert_eq!(
        (l[0].reason.as_str(), l[0].last_transition_time.clone()),
        ("b", at(7))
    );
    let ws = |reason: &str, t: i64| WorkloadSpreadSubsetCondition {
        type_: "Schedulable".into(),
        status: "False".into(),
        last_transition_time: at(t),
        reason: reason.into(),
        message: String::new(),
    };
    let mut l = vec![ws("a", 0), ws("a", 0)];
    l[1].type_ = "Other".into();
    assert!(set(&mut l, ws("b", 7)));
    assert_eq!(
        (l[0].reason.as_str(), l[0].last_transition_time.clone()),
        ("b", at(0))
    );
}

#[test]
fn ephemeral_job_conditions_take_the_new_times() {
    let c = |message: &str, t: i64| EphemeralJobCondition {
        type_: EphemeralJobConditionType::JobSucceeded,
        status: "True".into(),
        last_probe_time: at(t),
        last_transition_time: at(t),
        reason: Some("r".into()),
        message: Some(message.into()),
    };
    let mut l = vec![c("a", 0)];
    assert!(!set(&mut l, c("a", 3)));
    assert_eq!(l[0].last_probe_time, at(0));
    assert!(set(&mut l, c("b", 3)));
    assert_eq!(l[0].last_transition_time, at(3));
    assert!(is_true(&l, &EphemeralJobConditionType::JobSucceeded));
}

#[test]
fn pod_conditions_keep_their_times_while_the_status_stays() {
    let c = |status: &str, reason: &str, t: i64| PodCondition {
        type_: "X".into(),
        status: status.into(),
        reason: Some(reason.into()),
        last_probe_time: at(t),
        last_transition_time: at(t),
        ..Default::default()
    };
    let mut l = vec![c("False", "a", 1)];
    assert!(set(&mut l, c("False", "b", 2)));
    assert_eq!(
        l[0],
        PodCondition {
            reason: Some("b".into()),
            ..c("False", "a", 1)
        }
    );
    assert!(set(&mut l, c("True", "b", 3)));
    assert_eq!(l[0], c("True", "b", 3));
}

#[test]
fn resource_distribution_and_meta_conditions() {
    let mut l = vec![ResourceDistributionCondition {
        type_: "Conflict".into(),
        status: "True".into(),
        ..Default::default()
    }];
    assert!(get(&l, "Conflict").is_some_and(|c| c.message().is_none()));
    remove(&mut l, "Conflict");
    assert!(l.is_empty());
    let meta = MetaCondition {
        type_: "Ready".into(),
        status: "True".into(),
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
        message: String::new(),
        reason: "Up".into(),
        observed_generation: None,
    };
    assert!(is_true(std::slice::from_ref(&meta), "Ready"));
    assert_eq!(
        meta.last_transition_time(),
        Some(&Time(Timestamp::UNIX_EPOCH))
    );
}

fn arb_cs() -> impl Strategy<Value = CloneSetCondition> {
    (0..3u8, any::<bool>(), 0..3u8, 0..2u8, 0..100i64).prop_map(|(ty, st, r, m, t)| {
        cs(
            &format!("T{ty}"),
            if st { "True" } else { "False" },
            &format!("R{r}"),
            &format!("M{m}"),
            t,
        )
    })
}

proptest! {
    /// After `set`, the list holds exactly one condition of the type, saying what was set;
    /// its transition time is the old one exactly when the status did not change.
    #[test]
    fn set_leaves_one_condition_saying_what_was_set(
        start in proptest::collection::vec(arb_cs(), 0..5),
        new in arb_cs(),
    ) {
        let mut l: Vec<CloneSetCondition> = Vec::new();
        for c in start {
            set(&mut l, c);
        }
        let old = get(&l, new.type_.as_str()).cloned();
        let others: Vec<_> = l.iter().filter(|c| c.type_ != new.type_).cloned().collect();
        let changed = set(&mut l, new.clone());
        prop_assert_eq!(l.iter().filter(|c| c.type_ == new.type_).count(), 1);
        let got = get(&l, new.type_.as_str()).cloned().expect("set");
        prop_assert_eq!(
            (&got.status, &got.reason, &got.message),
            (&new.status, &new.reason, &new.message)
        );
        let kept: Vec<_> = l.iter().filter(|c| c.type_ != new.type_).cloned().collect();
        prop_assert_eq!(kept, others);
        match old {
            None => prop_assert!(changed && got == new),
            Some(o) if o.status == new.status => {
                prop_assert_eq!(got.last_transition_time, o.last_transition_time);
                prop_assert_eq!(changed, o.reason != new.reason || o.message != new.message);
            }
            Some(_) => prop_assert!(changed && got == new),
        }
    }
}
