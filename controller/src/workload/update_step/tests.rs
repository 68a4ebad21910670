use super::super::podutil::testpod::pod;
use super::*;
use CloneSetPodUpdateStrategyType::{InPlaceIfPossible, InPlaceOnly, ReCreate};
use LifecycleStateType as S;

fn hook() -> LifecycleHook {
    LifecycleHook {
        labels_handler: [("hold".to_string(), "yes".to_string())].into(),
        ..Default::default()
    }
}

fn changed() -> NotInPlace {
    NotInPlace::Changed {
        field: "spec.volumes".into(),
    }
}

/// A Pod in lifecycle `state` (none when `None`), carrying the hook's label when `hooked`.
fn pod_in(state: Option<S>, hooked: bool) -> Pod {
    let mut p = pod("a");
    if let Some(s) = state {
        p = p.state(s);
    }
    if hooked {
        p = p.label("hold", "yes");
    }
    p.build()
}

#[test]
fn update_step_table() {
    let h = hook();
    struct Row<'a> {
        name: &'static str,
        policy: CloneSetPodUpdateStrategyType,
        state: Option<S>,
        hooked: bool,
        hook: Option<&'a LifecycleHook>,
        can: Result<(), NotInPlace>,
        want: UpdateStep<'a>,
    }
    let rows = [
        Row {
            name: "ReCreate recreates without asking the engine",
            policy: ReCreate,
            state: Some(S::Normal),
            hooked: false,
            hook: None,
            can: Ok(()),
            want: UpdateStep::Recreate { reason: None },
        },
        Row {
            name: "InPlaceIfPossible falls back to recreate",
            policy: InPlaceIfPossible,
            state: Some(S::Normal),
            hooked: false,
            hook: None,
            can: Err(changed()),
            want: UpdateStep::Recreate {
                reason: Some(changed()),
            },
        },
        Row {
            name: "InPlaceOnly refuses what cannot be done in place",
            policy: InPlaceOnly,
            state: Some(S::Normal),
            hooked: false,
            hook: None,
            can: Err(changed()),
            want: UpdateStep::Refuse(Refusal::InPlaceOnly(changed())),
        },
        Row {
            name: "the revision check comes before the lifecycle state",
            policy: InPlaceIfPossible,
            state: Some(S::PreparingDelete),
            hooked: false,
            hook: None,
            can: Err(NotInPlace::NoOldRevision),
            want: UpdateStep::Recreate {
                reason: Some(NotInPlace::NoOldRevision),
            },
        },
        Row {
            name: "no lifecycle label: in place",
            policy: InPlaceIfPossible,
            state: None,
            hooked: false,
            hook: None,
            can: Ok(()),
            want: UpdateStep::InPlace,
        },
        Row {
            name: "Normal and not hooked: in place",
            policy: InPlaceIfPossible,
            state: Some(S::Normal),
            hooked: false,
            hook: Some(&h),
            can: Ok(()),
            want: UpdateStep::InPlace,
        },
        Row {
            name: "InPlaceOnly updates in place when it can",
            policy: InPlaceOnly,
            state: Some(S::Normal),
            hooked: false,
            hook: None,
            can: Ok(()),
            want: UpdateStep::InPlace,
        },
        Row {
            name: "Normal and hooked: prepare the update hook",
            policy: InPlaceIfPossible,
            state: Some(S::Normal),
            hooked: true,
            hook: Some(&h),
            can: Ok(()),
            want: UpdateStep::PrepareUpdateHook { handler: None },
        },
        Row {
            name: "PreparingNormal and hooked: prepare the update hook",
            policy: InPlaceIfPossible,
            state: Some(S::PreparingNormal),
            hooked: true,
            hook: Some(&h),
            can: Ok(()),
            want: UpdateStep::PrepareUpdateHook { handler: None },
        },
        Row {
            name: "Updated with a hook: prepare it again, putting its handler back",
            policy: InPlaceIfPossible,
            state: Some(S::Updated),
            hooked: false,
            hook: Some(&h),
            can: Ok(()),
            want: UpdateStep::PrepareUpdateHook { handler: Some(&h) },
        },
        Row {
            name: "Updated without a hook: wait",
            policy: InPlaceIfPossible,
            state: Some(S::Updated),
            hooked: false,
            hook: None,
            can: Ok(()),
            want: UpdateStep::Wait,
        },
        Row {
            name: "PreparingUpdate still hooked: wait for the hook",
            policy: InPlaceIfPossible,
            state: Some(S::PreparingUpdate),
            hooked: true,
            hook: Some(&h),
            can: Ok(()),
            want: UpdateStep::Wait,
        },
        Row {
            name: "PreparingUpdate released by the hook: in place",
            policy: InPlaceIfPossible,
            state: Some(S::PreparingUpdate),
            hooked: false,
            hook: Some(&h),
            can: Ok(()),
            want: UpdateStep::InPlace,
        },
        Row {
            name: "Updating: in place again",
            policy: InPlaceIfPossible,
            state: Some(S::Updating),
            hooked: true,
            hook: Some(&h),
            can: Ok(()),
            want: UpdateStep::InPlace,
        },
        Row {
            name: "PreparingDelete: refuse",
            policy: InPlaceOnly,
            state: Some(S::PreparingDelete),
            hooked: false,
            hook: None,
            can: Ok(()),
            want: UpdateStep::Refuse(Refusal::BadLifecycle(S::PreparingDelete)),
        },
    ];
    for r in rows {
        let p = pod_in(r.state, r.hooked);
        let got = update_step(r.policy, &p, r.hook, || r.can.clone());
        assert_eq!(got, r.want, "{}", r.name);
    }
}

#[test]
fn recreate_policy_never_evaluates_the_in_place_check() {
    let p = pod_in(Some(S::Normal), false);
    let mut asked = false;
    let step = update_step(ReCreate, &p, None, || {
        asked = true;
        Ok(())
    });
    assert_eq!(step, UpdateStep::Recreate { reason: None });
    assert!(!asked);
}

#[test]
fn fallback_table() {
    let rows = [
        (InPlaceIfPossible, Fallback::Recreate(changed())),
        (ReCreate, Fallback::Recreate(changed())),
        (
            InPlaceOnly,
            Fallback::Refuse(Refusal::InPlaceOnly(changed())),
        ),
    ];
    for (policy, want) in rows {
        assert_eq!(fallback(policy, changed()), want, "{policy:?}");
    }
}
