use super::*;
use jiff::ToSpan;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1beta1::AdvancedCronJobStatus;
use proptest::prelude::*;
use serde_json::{Value, json};

/// upstream's test clock start (`2025-10-10T09:00:00Z`, a Friday).
const T0: &str = "2025-10-10T09:00:00Z";

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

fn at(base: &str, secs: i64) -> Timestamp {
    ts(base) + secs.seconds()
}

fn acj(spec: Value) -> AdvancedCronJob {
    let mut full = json!({"schedule": "*/5 * * * *", "timeZone": "UTC",
        "template": {"jobTemplate": {"spec": {}}}});
    if let (Value::Object(f), Value::Object(s)) = (&mut full, spec) {
        f.extend(s);
    }
    let mut c: AdvancedCronJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "AdvancedCronJob",
        "metadata": {"name": "job1", "namespace": "default", "uid": "12345",
            "creationTimestamp": T0},
        "spec": full}))
    .expect("fixture");
    c.status = Some(AdvancedCronJobStatus::default());
    c
}

fn with_last(mut c: AdvancedCronJob, last: Timestamp) -> AdvancedCronJob {
    c.status = Some(AdvancedCronJobStatus {
        last_schedule_time: Some(Time(last)),
        ..Default::default()
    });
    c
}

fn child(name: &str, state: ChildState, scheduled: Timestamp) -> Child {
    Child {
        name: name.to_owned(),
        state,
        scheduled_at: Some(scheduled),
        started_at: Some(scheduled),
        deleting: false,
    }
}

fn created(p: &Plan) -> Option<(String, Timestamp, Vec<usize>)> {
    match &p.run {
        Run::Create { at, name, replace } => Some((name.clone(), at.timestamp(), replace.clone())),
        _ => None,
    }
}

#[test]
fn first_point_after_creation_creates_one_run_named_by_its_unix_time() {
    let c = acj(json!({}));
    // Before the first point: nothing, look again at it.
    let p = plan(&c, &[], at(T0, 60));
    assert_eq!(p.run, Run::Idle);
    assert_eq!(p.requeue, Some(Duration::from_secs(240)));
    // Upstream's test steps the clock 5 minutes: the 09:05 run.
    let p = plan(&c, &[], at(T0, 300));
    let (name, when, replace) = created(&p).expect("a run");
    assert_eq!(name, format!("job1-{}", at(T0, 300).as_second()));
    assert_eq!(name, "job1-1760087100");
    assert_eq!(when, at(T0, 300));
    assert!(replace.is_empty());
    assert_eq!(p.requeue, Some(Duration::from_secs(300)));
}

#[test]
fn a_restart_across_points_creates_only_the_latest_once() {
    // The last run was at 09:05; the manager was down until 09:21: three points passed, one
    // run (the 09:20 one) is created, not a burst.
    let c = with_last(acj(json!({})), at(T0, 300));
    let done = [child("job1-1760087100", ChildState::Succeeded, at(T0, 300))];
    let now = at(T0, 21 * 60);
    let (name, when, _) = created(&plan(&c, &done, now)).expect("a run");
    assert_eq!(when, at(T0, 20 * 60));
    assert_eq!(name, format!("job1-{}", when.as_second()));
    // Once it exists (even before the status says so), the same point is not run again.
    let mut after = done.to_vec();
    after.push(child(&name, ChildState::Active, when));
    assert_eq!(plan(&c, &after, now + 5.seconds()).run, Run::Idle);
    // Nor when the status says so and the run is already gone (history limit 0).
    let c = with_last(c, when);
    assert_eq!(plan(&c, &[], now + 5.seconds()).run, Run::Idle);
}

#[test]
fn concurrency_policies() {
    let last = at(T0, 300);
    let running = [child("job1-1760087100", ChildState::Active, last)];
    let now = at(T0, 600);
    // Allow: a second run beside the first.
    let c = with_last(acj(json!({"concurrencyPolicy": "Allow"})), last);
    let (_, when, replace) = created(&plan(&c, &running, now)).expect("allow runs");
    assert_eq!((when, replace), (now, Vec::new()));
    assert_eq!(plan(&c, &running, now).active, vec![0]);
    // Forbid: held back while one runs, then the missed point runs late (as upstream).
    let c = with_last(acj(json!({"concurrencyPolicy": "Forbid"})), last);
    assert!(matches!(plan(&c, &running, now).run, Run::Forbidden { .. }));
    let finished = [child("job1-1760087100", ChildState::Succeeded, last)];
    let later = now + 30.seconds();
    let (_, when, _) = created(&plan(&c, &finished, later)).expect("late run");
    assert_eq!(when, now);
    // Replace: the active runs go first.
    let c = with_last(acj(json!({"concurrencyPolicy": "Replace"})), last);
    let two = [
        child("a", ChildState::Active, at(T0, 0)),
        child("b", ChildState::Succeeded, at(T0, 150)),
        child("c", ChildState::Active, last),
    ];
    let (_, _, replace) = created(&plan(&c, &two, now)).expect("replace runs");
    assert_eq!(replace, vec![0, 2]);
}

#[test]
fn paused_creates_nothing_and_does_not_requeue_but_prunes() {
    let c = acj(json!({"paused": true, "successfulJobsHistoryLimit": 0}));
    let kids = [child("old", ChildState::Succeeded, at(T0, -600))];
    let p = plan(&c, &kids, at(T0, 3600));
    assert_eq!(p.run, Run::Idle);
    assert_eq!(p.requeue, None);
    assert_eq!(p.prune, vec![0]);
    // Resumed: the latest missed point runs (upstream's e2e expects a run after resume).
    let c = acj(json!({"paused": false}));
    let (_, when, _) = created(&plan(&c, &[], at(T0, 3600 + 10))).expect("run after resume");
    assert_eq!(when, at(T0, 3600));
}

#[test]
fn history_limits_prune_the_oldest_finished_runs() {
    let c = acj(json!({"successfulJobsHistoryLimit": 2, "failedJobsHistoryLimit": 1}));
    let mut kids: Vec<Child> = (0..5)
        .map(|i| {
            child(
                &format!("s{i}"),
                ChildState::Succeeded,
                at(T0, -3000 + i * 300),
            )
        })
        .collect();
    kids.push(child("f0", ChildState::Failed, at(T0, -2000)));
    kids.push(child("f1", ChildState::Failed, at(T0, -1000)));
    kids.push(child("run", ChildState::Active, at(T0, -100)));
    // No start time sorts first (upstream's comparison).
    kids[4].started_at = None;
    let mut gone = kids.clone();
    gone.push(Child {
        deleting: true,
        ..child("s-deleting", ChildState::Succeeded, at(T0, -5000))
    });
    let p = plan(&c, &gone, at(T0, 10));
    let names: Vec<&str> = p.prune.iter().map(|&i| gone[i].name.as_str()).collect();
    assert_eq!(names, ["f0", "s4", "s0", "s1"]);
    assert_eq!(p.active, vec![7]);
    // Unset limits prune nothing (the webhook defaults them to 3 and 1).
    let mut c = c;
    c.spec.successful_jobs_history_limit = None;
    c.spec.failed_jobs_history_limit = None;
    assert!(plan(&c, &kids, at(T0, 10)).prune.is_empty());
}

#[test]
fn starting_deadline() {
    // Down for an hour with a 60 s deadline: the points before now-60s are not looked at.
    let c = with_last(acj(json!({"startingDeadlineSeconds": 60})), at(T0, 0));
    assert_eq!(plan(&c, &[], at(T0, 3600 + 90)).run, Run::Idle);
    let (_, when, _) = created(&plan(&c, &[], at(T0, 3600 + 30))).expect("within");
    assert_eq!(when, at(T0, 3600));
    // Without one, the same hour of downtime runs the latest point.
    let c = with_last(acj(json!({})), at(T0, 0));
    assert!(created(&plan(&c, &[], at(T0, 3600 + 90))).is_some());
}

#[test]
fn too_many_missed_points_is_an_error_and_creates_nothing() {
    let c = with_last(acj(json!({"schedule": "* * * * *"})), at(T0, 0));
    // Exactly 100 missed points: the latest runs.
    assert!(created(&plan(&c, &[], at(T0, 100 * 60))).is_some());
    // 101: upstream's guard.
    let p = plan(&c, &[], at(T0, 101 * 60));
    assert_eq!(p.run, Run::Problem(Problem::TooManyMissed));
    assert!(p.requeue.is_some());
    // A starting deadline lifts it.
    let c = with_last(
        acj(json!({"schedule": "* * * * *", "startingDeadlineSeconds": 200})),
        at(T0, 0),
    );
    assert!(created(&plan(&c, &[], at(T0, 101 * 60))).is_some());
}

#[test]
fn a_clock_behind_the_last_run_waits() {
    let c = with_last(acj(json!({})), at(T0, 600));
    let p = plan(&c, &[], at(T0, 100));
    assert_eq!(p.run, Run::Idle);
    assert_eq!(p.requeue, Some(Duration::from_secs(200)));
}

#[test]
fn bad_schedules_and_zones() {
    let c = acj(json!({"schedule": "61 * * * *"}));
    assert!(matches!(
        plan(&c, &[], at(T0, 300)).run,
        Run::Problem(Problem::Schedule { .. })
    ));
    // Shanghai 10:00 is 02:00Z; the run's name carries the instant.
    let c = acj(json!({"schedule": "0 10 * * *", "timeZone": "Asia/Shanghai"}));
    let (name, when, _) = created(&plan(&c, &[], ts("2025-10-11T02:00:30Z"))).expect("a run");
    assert_eq!(when, ts("2025-10-11T02:00:00Z"));
    assert_eq!(name, format!("job1-{}", when.as_second()));
    match plan(&c, &[], ts("2025-10-11T02:00:30Z")).run {
        Run::Create { at, .. } => {
            assert_eq!(cron::format_rfc3339(&at), "2025-10-11T10:00:00+08:00");
        }
        other => panic!("{other:?}"),
    }
}

/// A world the property test drives: the runs that exist and the status the last reconcile
/// wrote, reconciled at arbitrary times (a manager that restarts keeps nothing else).
fn simulate(
    schedule: &str,
    policy: &str,
    steps: &[(i64, bool)],
) -> Vec<(String, Timestamp, Timestamp)> {
    let mut c = acj(json!({"schedule": schedule, "concurrencyPolicy": policy}));
    let mut kids: Vec<Child> = Vec::new();
    let mut created_runs = Vec::new();
    let mut now = ts(T0);
    for &(advance, finish) in steps {
        now += advance.seconds();
        if finish {
            for k in kids.iter_mut() {
                k.state = ChildState::Succeeded;
            }
        }
        let p = plan(&c, &kids, now);
        if let Run::Create { at, name, replace } = p.run {
            for i in replace.into_iter().rev() {
                kids.remove(i);
            }
            created_runs.push((name.clone(), at.timestamp(), now));
            kids.push(child(&name, ChildState::Active, at.timestamp()));
            c = with_last(c, at.timestamp());
        }
    }
    created_runs
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn never_two_runs_of_one_point_nor_runs_from_the_future(
        steps in proptest::collection::vec((0i64..400, any::<bool>()), 1..60),
        sched in prop_oneof![Just("@every 10s"), Just("*/1 * * * *"), Just("*/5 * * * *")],
        policy in prop_oneof![Just("Allow"), Just("Forbid"), Just("Replace")],
    ) {
        let runs = simulate(sched, policy, &steps);
        let mut names: Vec<&String> = runs.iter().map(|r| &r.0).collect();
        names.sort();
        names.dedup();
        prop_assert_eq!(names.len(), runs.len(), "a point ran twice");
        for w in runs.windows(2) {
            prop_assert!(w[0].1 < w[1].1, "points go forward");
            prop_assert!(w[0].2 < w[1].2, "one run per reconcile");
        }
        for (_, point, when) in &runs {
            prop_assert!(point <= when, "a run before its point");
        }
    }
}

#[test]
fn upstream_imagelistpulljob_again_scenario() {
    // upstream `TestReconcileAdvancedJobCreateImageListPullJobAgain`: six runs 5 minutes apart
    // (succeeded, failed, failed, succeeded, succeeded, active), limits 2 succeeded and 1 failed,
    // Replace, a 360 s starting deadline, the clock 5 minutes on: the oldest failed and the
    // oldest succeeded go, the active run is replaced by the new point's: four runs remain.
    let c = acj(
        json!({"concurrencyPolicy": "Replace", "startingDeadlineSeconds": 360,
        "successfulJobsHistoryLimit": 2, "failedJobsHistoryLimit": 1}),
    );
    let states = [
        (-25, ChildState::Succeeded),
        (-20, ChildState::Failed),
        (-15, ChildState::Failed),
        (-10, ChildState::Succeeded),
        (-5, ChildState::Succeeded),
        (0, ChildState::Active),
    ];
    let kids: Vec<Child> = states
        .iter()
        .map(|&(m, s)| child(&format!("job1-t{m}"), s, at(T0, m * 60)))
        .collect();
    let p = plan(&c, &kids, at(T0, 300));
    let pruned: Vec<&str> = p.prune.iter().map(|&i| kids[i].name.as_str()).collect();
    assert_eq!(pruned, ["job1-t-20", "job1-t-25"]);
    let (_, when, replace) = created(&p).expect("the 09:05 run");
    assert_eq!(when, at(T0, 300));
    assert_eq!(replace, vec![5]);
    assert_eq!(kids.len() - pruned.len() - replace.len() + 1, 4);
}
