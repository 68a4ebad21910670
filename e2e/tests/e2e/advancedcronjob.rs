//! AdvancedCronJob on the real cluster, installed from `deploy/`, on `@every` schedules so a
//! test waits seconds, not minutes: each point creates one run named `<name>-<unix point>`,
//! annotated with its point and owned by the AdvancedCronJob, and the status follows
//! (`type`, `active`, `lastScheduleTime`); the history limit prunes finished runs; Forbid holds
//! a run back while one is active and Replace deletes it; `paused` stops the runs until it is
//! cleared; the BroadcastJob and ImageListPullJob templates make their kinds; the webhook
//! defaults as upstream and refuses bad input naming the field; a manager killed across
//! schedule points makes one run for the latest point, not a burst.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use kruise_api::keys;
use kruise_e2e::advancedcronjob::{self as acj, runs, scheduled_at};
use kruise_e2e::{TestNamespace, client, image, wait_for};
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(40);

async fn create(api: &Api<DynamicObject>, obj: &DynamicObject) -> String {
    api.create(&PostParams::default(), obj)
        .await
        .expect("create")
        .uid()
        .expect("uid")
}

async fn pause(api: &Api<DynamicObject>, name: &str, paused: bool) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": paused}})),
    )
    .await
    .expect("pause");
}

fn finished(run: &DynamicObject, kind: &str) -> bool {
    run.data["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == kind && c["status"] == "True")
        })
}

#[tokio::test]
async fn job_runs_each_point_named_annotated_owned_with_status_and_history() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-acj-job")
        .await
        .expect("ns");
    let api = acj::api(&client, &ns.name);
    let obj = acj::with_job(
        "tick",
        "@every 5s",
        "true",
        json!({"successfulJobsHistoryLimit": 1}),
    )
    .expect("acj");
    let uid = create(&api, &obj).await;
    // Every run seen, by name: its point and whether it succeeded.
    let seen: RefCell<BTreeMap<String, i64>> = RefCell::new(BTreeMap::new());
    wait_for("three runs", WAIT, || {
        let (client, ns, uid, seen) = (&client, &ns.name, &uid, &seen);
        async move {
            for run in runs(client, ns, "Job", uid).await? {
                let point = scheduled_at(&run).expect("scheduled-at annotation");
                assert_eq!(
                    run.name_any(),
                    format!("tick-{point}"),
                    "named by its point"
                );
                assert_eq!(run.labels().get("run-of").map(String::as_str), Some("tick"));
                let owner = &run.owner_references()[0];
                assert_eq!(
                    (
                        owner.kind.as_str(),
                        owner.api_version.as_str(),
                        owner.controller
                    ),
                    ("AdvancedCronJob", keys::APPS_V1BETA1, Some(true))
                );
                seen.borrow_mut().insert(run.name_any(), point);
            }
            Ok((seen.borrow().len() >= 3).then_some(()))
        }
    })
    .await
    .expect("runs");
    let points: Vec<i64> = seen.borrow().values().copied().collect();
    for w in points.windows(2) {
        assert!(
            w[1] - w[0] >= 5 && (w[1] - w[0]) % 5 == 0,
            "points 5 s apart: {points:?}"
        );
    }
    // The history limit keeps one succeeded run; the status names the latest point. The
    // controller writes the status just after it creates a run, so a read between the two sees
    // the run before the status: the wait takes a pair read in that order where they agree.
    let last_scheduled = |status: &Value| {
        status["lastScheduleTime"]
            .as_str()
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
            .map(|t| t.as_second())
    };
    let status = wait_for("history pruned, status at the newest run", WAIT, || async {
        let list = runs(&client, &ns.name, "Job", &uid).await?;
        let done = list.iter().filter(|r| finished(r, "Complete")).count();
        let newest = list.iter().filter_map(scheduled_at).max();
        let status = api.get("tick").await?.data["status"].clone();
        let current = newest.is_some() && last_scheduled(&status) >= newest;
        Ok((done == 1 && list.len() <= 2 && current).then_some(status))
    })
    .await
    .expect("pruned, with the status naming the newest run");
    assert_eq!(status["type"], "Job", "{status}");
    pause(&api, "tick", true).await;
    ns.delete().await.expect("cleanup");
}

#[tokio::test]
async fn forbid_holds_runs_back_and_replace_replaces_the_active_one() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-acj-conc")
        .await
        .expect("ns");
    let api = acj::api(&client, &ns.name);
    let forbid = acj::with_job(
        "forbid",
        "@every 3s",
        "sleep 600",
        json!({"concurrencyPolicy": "Forbid"}),
    )
    .expect("acj");
    let replace = acj::with_job(
        "replace",
        "@every 3s",
        "sleep 600",
        json!({"concurrencyPolicy": "Replace"}),
    )
    .expect("acj");
    let f_uid = create(&api, &forbid).await;
    let r_uid = create(&api, &replace).await;
    let replaced: RefCell<Vec<String>> = RefCell::new(Vec::new());
    wait_for("Replace to replace its run twice", WAIT, || {
        let (client, ns, r_uid, replaced) = (&client, &ns.name, &r_uid, &replaced);
        async move {
            let list = runs(client, ns, "Job", r_uid).await?;
            assert!(
                list.len() <= 2,
                "Replace keeps one run (one more while it is created)"
            );
            let mut names = replaced.borrow_mut();
            for r in list {
                if !names.contains(&r.name_any()) {
                    names.push(r.name_any());
                }
            }
            Ok((names.len() >= 3).then_some(()))
        }
    })
    .await
    .expect("replaced");
    // Forbid: by now several points passed, and still one run.
    let held = runs(&client, &ns.name, "Job", &f_uid).await.expect("runs");
    assert_eq!(held.len(), 1, "Forbid runs one at a time");
    let status = api.get("forbid").await.expect("get").data["status"].clone();
    assert_eq!(
        status["active"].as_array().map(Vec::len),
        Some(1),
        "{status}"
    );
    assert_eq!(status["active"][0]["name"], json!(held[0].name_any()));
    assert_eq!(status["active"][0]["kind"], "Job");
    // Replace: the older runs are gone, the status shows the one left.
    let (left, status) = wait_for("Replace settles on one run", WAIT, || async {
        let list = runs(&client, &ns.name, "Job", &r_uid).await?;
        let st = api.get("replace").await?.data["status"].clone();
        let one = list.len() == 1
            && st["active"].as_array().map(Vec::len) == Some(1)
            && st["active"][0]["name"] == json!(list[0].name_any());
        Ok(one.then_some((list, st)))
    })
    .await
    .expect("one run");
    let replaced = replaced.into_inner();
    assert!(
        replaced.first() != Some(&left[0].name_any()),
        "{replaced:?} {status}"
    );
    for name in ["forbid", "replace"] {
        pause(&api, name, true).await;
    }
    ns.delete().await.expect("cleanup");
}

#[tokio::test]
async fn paused_makes_no_run_until_resumed() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-acj-pause")
        .await
        .expect("ns");
    let api = acj::api(&client, &ns.name);
    let obj = acj::with_job("held", "@every 2s", "true", json!({"paused": true})).expect("acj");
    let uid = create(&api, &obj).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(
        runs(&client, &ns.name, "Job", &uid)
            .await
            .expect("runs")
            .is_empty(),
        "no run while paused"
    );
    pause(&api, "held", false).await;
    wait_for("a run after resume", Duration::from_secs(20), || async {
        Ok((!runs(&client, &ns.name, "Job", &uid).await?.is_empty()).then_some(()))
    })
    .await
    .expect("resumed");
    pause(&api, "held", true).await;
    ns.delete().await.expect("cleanup");
}

#[tokio::test]
async fn broadcastjob_and_imagelistpulljob_templates_make_their_kinds() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-acj-kinds")
        .await
        .expect("ns");
    let api = acj::api(&client, &ns.name);
    let bcj = acj::new(
        "bcast",
        "@every 3s",
        json!({"broadcastJobTemplate": {"metadata": {"labels": {"run-of": "bcast"}},
            "spec": {"template": acj::pod("true"), "completionPolicy": {"type": "Always"}}}}),
        json!({"concurrencyPolicy": "Forbid"}),
    )
    .expect("acj");
    let ilpj = acj::new(
        "pull",
        "@every 3s",
        json!({"imageListPullJobTemplate": {"spec": {"images": [image("sidecar", "v1")]}}}),
        json!({}),
    )
    .expect("acj");
    let b_uid = create(&api, &bcj).await;
    let i_uid = create(&api, &ilpj).await;
    for (name, kind, uid) in [
        ("bcast", "BroadcastJob", &b_uid),
        ("pull", "ImageListPullJob", &i_uid),
    ] {
        let run = wait_for(&format!("a {kind} run"), WAIT, || async {
            Ok(runs(&client, &ns.name, kind, uid).await?.into_iter().next())
        })
        .await
        .expect("run");
        let point = scheduled_at(&run).expect("annotation");
        assert_eq!(run.name_any(), format!("{name}-{point}"));
        // The run is created before the status names it.
        let status = wait_for("status.type and lastScheduleTime", WAIT, || async {
            let st = api.get(name).await?.data["status"].clone();
            Ok((st["type"] == kind && st["lastScheduleTime"].is_string()).then_some(st))
        })
        .await
        .expect("status");
        let last: jiff::Timestamp = status["lastScheduleTime"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .expect("a time");
        assert!(
            last.as_second() >= point,
            "{status} vs the run's point {point}"
        );
        pause(&api, name, true).await;
    }
    // The ImageListPullJob template was defaulted as upstream: Replace, Always, pull policy.
    let pull = api.get("pull").await.expect("get");
    assert_eq!(pull.data["spec"]["concurrencyPolicy"], "Replace");
    let t = &pull.data["spec"]["template"]["imageListPullJobTemplate"]["spec"];
    assert_eq!(t["completionPolicy"]["type"], "Always");
    assert_eq!(t["pullPolicy"]["timeoutSeconds"], 600);
    ns.delete().await.expect("cleanup");
}

fn refusal(err: kube::Error) -> String {
    match err {
        kube::Error::Api(s) => s.message,
        other => other.to_string(),
    }
}

#[tokio::test]
async fn webhook_defaults_and_refuses_bad_input_naming_the_field() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-acj-webhook")
        .await
        .expect("ns");
    let api = acj::api(&client, &ns.name);
    let ok = acj::with_job("ok", "0 3 * * *", "true", json!({})).expect("acj");
    let created = api
        .create(&PostParams::default(), &ok)
        .await
        .expect("create");
    let spec = &created.data["spec"];
    assert_eq!(
        (
            &spec["concurrencyPolicy"],
            &spec["paused"],
            &spec["successfulJobsHistoryLimit"],
            &spec["failedJobsHistoryLimit"]
        ),
        (&json!("Allow"), &json!(false), &json!(3), &json!(1))
    );
    let bad = |patch: Value| {
        let mut o = acj::with_job("bad", "0 3 * * *", "true", json!({})).expect("acj");
        if let (Some(s), Some(p)) = (o.data["spec"].as_object_mut(), patch.as_object()) {
            s.extend(p.clone());
        }
        o
    };
    let cases = [
        (
            json!({"schedule": "61 * * * *"}),
            "spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59)",
        ),
        (
            json!({"schedule": "@every 1d"}),
            "spec.schedule: Invalid value: \"@every 1d\"",
        ),
        (
            json!({"timeZone": "Mars/Olympus"}),
            "spec.timeZone: Invalid value: \"Mars/Olympus\"",
        ),
        (
            json!({"template": {"jobTemplate": {"spec": {"template": acj::pod("true")}},
                "broadcastJobTemplate": {"spec": {"template": acj::pod("true")}}}}),
            "spec.template: Forbidden: spec can have only one template",
        ),
        (
            json!({"template": {}}),
            "spec.template: Forbidden: spec must have one template",
        ),
    ];
    for (patch, want) in cases {
        let err = api
            .create(&PostParams::default(), &bad(patch))
            .await
            .expect_err(want);
        let msg = refusal(err);
        assert!(msg.contains(want), "{msg:?} lacks {want:?}");
    }
    // Only the schedule, the policies, the limits, paused and timeZone may change.
    let err = api
        .patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"template": {"jobTemplate": {"spec": {"backoffLimit": 3}}}}}),
            ),
        )
        .await
        .expect_err("template is immutable");
    assert!(refusal(err).contains("spec: Forbidden: updates to advancedcronjob spec"));
    api.patch(
        "ok",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"schedule": "@every 1h", "timeZone": "Europe/Berlin"}})),
    )
    .await
    .expect("schedule and timeZone may change");
    let err = api
        .patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"schedule": "TZ=UTC 0 3 * * *"}})),
        )
        .await
        .expect_err("TZ= and timeZone together");
    assert!(refusal(err).contains("cannot use both timeZone field and TZ or CRON_TZ in schedule"));
    // v1alpha1 is served too (no imageListPullJobTemplate there), stored as v1beta1.
    let alpha: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns.name,
        &acj::resource(keys::VERSION_V1ALPHA1),
    );
    let mut old = acj::with_job("alpha", "@hourly", "true", json!({})).expect("acj");
    old.types = Some(kube::api::TypeMeta {
        api_version: keys::APPS_V1ALPHA1.to_owned(),
        kind: keys::ADVANCEDCRONJOB_KIND.to_owned(),
    });
    alpha
        .create(&PostParams::default(), &old)
        .await
        .expect("v1alpha1 create");
    let read = api.get("alpha").await.expect("read as v1beta1");
    assert_eq!(read.data["spec"]["concurrencyPolicy"], "Allow");
    ns.delete().await.expect("cleanup");
}

/// The schedule of the manager-kill test: the outage below (at least [`FREEZE`] seconds, or the
/// 5 s a standby waits for the Lease) holds at least two of its points, so making only the
/// latest of them shows in the history.
const TICK: i64 = 2;
/// Seconds the leading manager hangs (SIGSTOP) before it is killed (SIGKILL).
const FREEZE: u64 = 6;
/// Seconds after the kill by which a run is still the killed leader's (a create it had in
/// flight); no other manager leads before its Lease (renewed 5 s before it expires) runs out.
const LINGER: i64 = 4;

/// Crashes the leading manager: it hangs (SIGSTOP) for [`FREEZE`] seconds, then dies (SIGKILL),
/// so it neither renews nor hands over its Lease, and no run is made until the kubelet has
/// restarted it or the standby has waited out the Lease. Why not simply a kill: deleting the
/// leader Pod (`kruise_e2e::mode::kill_manager`), even with grace 0, has the kubelet stop it with
/// SIGTERM first and the manager releases the Lease, and a bare SIGKILL has its container
/// restarted within a second or so under the same Lease identity (`<pod>_<pid>`, and the pid in
/// a container is always the same), which resumes at once; runs of this test showed runs every
/// 2 s straight through both. In cluster the leader's process is found on this host by the
/// `POD_NAME` its container has; in dev mode the manager is SIGKILLed and started again.
async fn crash_leading_manager(client: &kube::Client) {
    if kruise_e2e::mode::mode() == kruise_e2e::mode::Mode::Dev {
        kruise_e2e::mode::kill_manager(client, async || {})
            .await
            .expect("kill the dev-mode manager");
        return;
    }
    kruise_e2e::mode::check_isolation().expect("no dev-mode manager beside the install");
    let leader = kruise_e2e::mode::manager_leader_pod(client)
        .await
        .expect("the Lease's holder");
    let want = format!("POD_NAME={leader}");
    let pids: Vec<u32> = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "kruise-manager")
                && std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == want.as_bytes()))
        })
        .collect();
    let [pid] = pids[..] else {
        panic!("expected one kruise-manager process of Pod {leader} on this host, found {pids:?}");
    };
    let signal = |sig: &str| {
        let status = std::process::Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {sig} {pid}");
    };
    signal("-STOP");
    tokio::time::sleep(Duration::from_secs(FREEZE)).await;
    signal("-KILL");
    wait_for("the killed manager to exit", WAIT, || async {
        Ok((!std::path::Path::new(&format!("/proc/{pid}")).exists()).then_some(()))
    })
    .await
    .expect("the manager gone");
}

/// What is wrong with a history of runs `(point, created)` (seconds, sorted by point) on an
/// `@every period` schedule across a leading manager killed at `killed`: while a manager leads,
/// every point has exactly one run (no gap, no point twice); the outage skips points (at least
/// one, or the test proved nothing) and the next leader makes one run for the latest point only,
/// not one per missed point (a burst) nor the earliest; every run is for the latest point at the
/// time it was created. Runs created up to `LINGER` seconds after the kill are the killed
/// leader's.
fn takeover_faults(made: &[(i64, i64)], period: i64, killed: i64) -> Vec<String> {
    let mut faults = Vec::new();
    let mut takeovers = 0;
    // (Creation times are whole seconds: a late takeover run and the next point's run can share
    // one, so a burst is told by the gap it fills, not by creation times.)
    for w in made.windows(2) {
        let ((p0, c0), (p1, c1)) = (w[0], w[1]);
        let gap = p1 - p0;
        let takeover = c0 <= killed + LINGER && c1 > killed + LINGER;
        takeovers += usize::from(takeover);
        if gap == 0 {
            faults.push(format!("two runs for point {p1}"));
        } else if gap % period != 0 {
            faults.push(format!("points {p0} and {p1}: not on the schedule"));
        } else if takeover && gap < 2 * period {
            faults.push(format!(
                "the takeover ({p0} → {p1}) skipped no point: nothing was missed, or every \
                 missed point was made (a burst)"
            ));
        } else if !takeover && gap > period {
            faults.push(format!(
                "{} run(s) lost between points {p0} and {p1}, with a manager leading",
                gap / period - 1
            ));
        }
    }
    if takeovers != 1 {
        faults.push(format!(
            "{takeovers} gaps span the kill: want runs both before and after it"
        ));
    }
    // The controller picks the latest point when it reconciles; its create may land up to a
    // period later under load (a takeover's first run was seen 2 s after its point), while a
    // missed point made up at takeover is older (the gap checks above catch the rest).
    for &(p, c) in made {
        if !(0..2 * period).contains(&(c - p)) {
            faults.push(format!(
                "the run for point {p} was created at {c}: not the latest point then"
            ));
        }
    }
    faults
}

/// The check above fails each way a takeover can go wrong (histories of a 2 s schedule, the
/// manager killed at 105: runs created after 109 are the next leader's).
#[test]
fn takeover_faults_name_a_lost_a_doubled_and_a_made_up_run() {
    let good = [(100, 100), (102, 102), (104, 104), (112, 113), (114, 114)];
    assert_eq!(takeover_faults(&good, 2, 105), Vec::<String>::new());
    // A point skipped while the manager led.
    let lost = [(100, 100), (104, 104), (112, 113), (114, 114)];
    assert!(takeover_faults(&lost, 2, 105)[0].contains("1 run(s) lost between points 100 and 104"));
    // A point with two runs.
    let doubled = [(100, 100), (102, 102), (102, 103), (104, 104), (112, 113)];
    assert!(takeover_faults(&doubled, 2, 105)[0].contains("two runs for point 102"));
    // Every missed point made at takeover (a burst), or only the earliest.
    let burst = [(104, 104), (106, 113), (108, 113), (110, 113), (112, 113)];
    let faults = takeover_faults(&burst, 2, 105);
    assert!(faults[0].contains("skipped no point"), "{faults:?}");
    assert!(
        faults
            .iter()
            .any(|f| f.contains("point 106 was created at 113")),
        "{faults:?}"
    );
    let earliest = [(104, 104), (106, 113), (114, 114)];
    assert!(
        takeover_faults(&earliest, 2, 105)
            .iter()
            .any(|f| f.contains("not the latest"))
    );
    // A takeover that crossed no point proves nothing (a 4 s schedule, killed at 101).
    let quick = [(96, 96), (100, 100), (104, 106), (108, 108)];
    assert!(takeover_faults(&quick, 4, 101)[0].contains("skipped no point"));
    // Histories seen on the cluster: a standby's takeover 14 s after the kill (its first run
    // landed 2 s after its point); a leader back within a second (its Pod deleted), which
    // proves nothing; a run made up for a missed point by hand (the broken-behaviour run).
    let seen = [(591, 591), (593, 593), (607, 609), (609, 610)];
    assert_eq!(takeover_faults(&seen, 2, 593), Vec::<String>::new());
    let back_at_once = [(577, 577), (579, 579), (581, 581), (583, 584), (585, 586)];
    assert!(takeover_faults(&back_at_once, 2, 579)[0].contains("skipped no point"));
    let made_up = [(924, 924), (926, 926), (928, 937), (934, 936), (936, 936)];
    let faults = takeover_faults(&made_up, 2, 926);
    assert!(
        faults
            .iter()
            .any(|f| f.contains("point 928 was created at 937")),
        "{faults:?}"
    );
    assert!(
        faults
            .iter()
            .any(|f| f.contains("lost between points 928 and 934")),
        "{faults:?}"
    );
    // No run after the kill.
    assert!(takeover_faults(&[(100, 100), (102, 102)], 2, 105)[0].contains("0 gaps"));
}

/// The leading manager crashed (hung, then killed) while runs come every 2 s: the next leader makes one run
/// for the latest point it finds missed, not one per missed point, and goes on from there; no
/// point has two runs and none is lost while a manager leads (`takeover_faults`).
#[tokio::test]
async fn serial_a_manager_killed_across_points_makes_one_run_not_a_burst() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-acj-restart")
        .await
        .expect("ns");
    let api = acj::api(&client, &ns.name);
    let obj = acj::with_job(
        "tick",
        &format!("@every {TICK}s"),
        "true",
        json!({"successfulJobsHistoryLimit": 100}),
    )
    .expect("acj");
    let uid = create(&api, &obj).await;
    wait_for("two runs", WAIT, || async {
        Ok((runs(&client, &ns.name, "Job", &uid).await?.len() >= 2).then_some(()))
    })
    .await
    .expect("runs");
    let killed = jiff::Timestamp::now();
    crash_leading_manager(&client).await;
    let all = wait_for(
        "two runs of the next leader",
        Duration::from_secs(120),
        || async {
            let list = runs(&client, &ns.name, "Job", &uid).await?;
            let after = list
                .iter()
                .filter(|r| {
                    r.creation_timestamp()
                        .is_some_and(|t| t.0.as_second() > killed.as_second() + LINGER)
                })
                .count();
            Ok((after >= 2).then_some(list))
        },
    )
    .await
    .expect("runs after the restart");
    // Paused first, so that no run comes between the list and the check.
    pause(&api, "tick", true).await;
    let mut made: Vec<(i64, i64)> = all
        .iter()
        .map(|r| {
            let created = r.creation_timestamp().expect("created").0.as_second();
            (scheduled_at(r).expect("point"), created)
        })
        .collect();
    made.sort_unstable();
    eprintln!(
        "(point, created) of each run, the manager killed at {}: {made:?}",
        killed.as_second()
    );
    let faults = takeover_faults(&made, TICK, killed.as_second());
    assert!(faults.is_empty(), "{faults:#?}\nhistory: {made:?}");
    ns.delete().await.expect("cleanup");
}

/// `kubectl kruise create job NAME --from=advancedcronjob/X` makes the Job now from the
/// template (kruise-tools' form), and `advancedcronjob pause|resume` flips `spec.paused`.
#[tokio::test]
async fn plugin_creates_a_job_from_the_template_and_pauses() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-acj-cli")
        .await
        .expect("ns");
    let api = acj::api(&client, &ns.name);
    let obj = acj::with_job("nightly", "0 3 * * *", "true", json!({})).expect("acj");
    let uid = create(&api, &obj).await;
    let kk = kruise_e2e::cli::Kruise::new(&ns.name).expect("plugin");
    let run = kk
        .run(&["create", "job", "by-hand", "--from=advancedcronjob/nightly"])
        .await
        .expect("run");
    assert_eq!(run.code, Some(0), "{run}");
    let job = acj::runs_api(&client, &ns.name, "Job")
        .get("by-hand")
        .await
        .expect("the Job");
    assert_eq!(
        job.annotations()
            .get(keys::k8s::CRONJOB_INSTANTIATE_ANNOTATION)
            .map(String::as_str),
        Some("manual")
    );
    assert_eq!(
        job.labels().get("run-of").map(String::as_str),
        Some("nightly")
    );
    let owner = &job.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("AdvancedCronJob", uid.as_str())
    );
    for (verb, want) in [("pause", true), ("resume", false)] {
        let run = kk.run(&["acj", verb, "nightly"]).await.expect("run");
        assert_eq!(run.code, Some(0), "{run}");
        let paused = api.get("nightly").await.expect("get").data["spec"]["paused"].clone();
        assert_eq!(paused, json!(want));
    }
    let missing = kk
        .run(&["create", "job", "x", "--from=acj/missing"])
        .await
        .expect("run");
    assert_eq!(missing.code, Some(6), "{missing}");
    let wrong = kk
        .run(&["create", "job", "x", "--from=cronjob/nightly"])
        .await
        .expect("run");
    assert_eq!(wrong.code, Some(2), "{wrong}");
    ns.delete().await.expect("cleanup");
}
