//! The live view (`rollout watch`) in a real terminal: a detached tmux session runs a shell, the
//! view follows a real in-place rollout on screen, `q` quits with exit 0 and leaves the alternate
//! screen so the shell's own screen comes back clean.
//!
//! Needs tmux and the binary (`cargo build -p kubectl-kruise`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kruise_e2e::cli::{Kruise, Tmux};
use kruise_e2e::cloneset::{self, set_image, status_str, wait_rolled_out, wait_status};
use kruise_e2e::{TestNamespace, client};
use kube::ResourceExt;
use kube::api::PostParams;
use serde_json::json;

const ROLLOUT: Duration = Duration::from_secs(180);
const PROMPT: &str = "e2e$ ";
const REPLICAS: usize = 4;

/// The hash part of a revision as the view prints it: at most 10 characters from 120 columns up,
/// 7 below.
fn short_rev(rev: &str, width: u16) -> String {
    let hash = rev.rsplit('-').next().unwrap_or(rev);
    hash.chars()
        .take(if width >= 120 { 10 } else { 7 })
        .collect()
}

/// `updated X/Y` from the header's counts line.
fn updated_count(screen: &str) -> Option<(u32, u32)> {
    let rest = screen.split_once(" updated ")?.1;
    let (x, rest) = rest.split_once('/')?;
    let y: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((x.parse().ok()?, y.parse().ok()?))
}

/// The REV cell of each pod row (rows start with the pod name).
fn pod_revs(screen: &str, pods: &[String]) -> Vec<Option<String>> {
    pods.iter()
        .map(|name| {
            let row = screen.lines().find(|l| l.starts_with(name.as_str()))?;
            row.split_whitespace().nth(2).map(str::to_string)
        })
        .collect()
}

async fn poll_screen(
    tmux: &Tmux,
    what: &str,
    timeout: Duration,
    mut seen: impl FnMut(&str) -> bool,
) -> String {
    let start = Instant::now();
    loop {
        let screen = tmux.capture().expect("capture-pane");
        if seen(&screen) {
            return screen;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}; screen:\n{screen}"
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

/// Watches an in-place rollout of 4 Pods, one at a time, in a `width`x`height` terminal.
async fn live_view_follows_rollout(width: u16, height: u16) {
    // Before creating anything, so a missing binary leaves no namespace behind.
    kruise_e2e::cli::binary().expect("kubectl-kruise binary");
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-tui")
        .await
        .expect("test namespace");
    let kk = Kruise::new(&ns.name).expect("kubectl-kruise binary and kubeconfig");
    let api = cloneset::api(&client, &ns.name);
    let pods_api = ns.api::<Pod>();
    let strategy = json!({"type": "RollingUpdate",
        "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}});
    api.create(
        &PostParams::default(),
        &cloneset::new("web", REPLICAS as i32, "v1", strategy).expect("CloneSet"),
    )
    .await
    .expect("create CloneSet");
    let first = wait_rolled_out(&api, "web", REPLICAS as i64, ROLLOUT)
        .await
        .expect("initial rollout");
    let pods: Vec<String> = cloneset::pods(&pods_api, "web")
        .await
        .expect("pods")
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert_eq!(pods.len(), REPLICAS);
    let old = short_rev(status_str(&first, "updateRevision"), width);

    let tmux = Tmux::start(
        width,
        height,
        PROMPT,
        &[
            ("KK", kk.bin.display().to_string()),
            ("KC", kk.kubeconfig.display().to_string()),
        ],
    )
    .expect("tmux session");
    assert_eq!(tmux.size().expect("size"), format!("{width}x{height}"));
    poll_screen(&tmux, "the shell prompt", Duration::from_secs(10), |s| {
        s.contains(PROMPT.trim_end())
    })
    .await;
    tmux.type_text(&format!(
        "\"$KK\" --kubeconfig \"$KC\" -n {} rollout watch clone/web; echo \"EXIT=$?\"",
        ns.name
    ))
    .expect("type");
    tmux.key("Enter").expect("enter");

    let start_screen = poll_screen(
        &tmux,
        "the view of the finished CloneSet",
        Duration::from_secs(30),
        |s| {
            updated_count(s) == Some((REPLICAS as u32, REPLICAS as u32))
                && pod_revs(s, &pods)
                    .iter()
                    .all(|r| r.as_deref() == Some(&format!("{old}*")))
        },
    )
    .await;
    println!("{width}x{height}: first screen:\n{start_screen}");
    assert!(start_screen.contains("cloneset/web"), "{start_screen}");
    assert!(
        start_screen.contains("q quit"),
        "footer shown: {start_screen}"
    );

    set_image(&api, "web", "v2").await.expect("set image");
    let changed = wait_status(&api, "web", "the new revision", ROLLOUT, |cs| {
        status_str(cs, "updateRevision") != status_str(&first, "updateRevision")
    })
    .await
    .expect("new revision");
    let new = short_rev(status_str(&changed, "updateRevision"), width);
    assert_ne!(new, old);

    // Follow the screen until every Pod row shows the new revision and the counts say 4/4.
    let mut counts: Vec<u32> = Vec::new();
    let mut mixed = false;
    let mut header_rev = false;
    let done_screen = poll_screen(&tmux, "every Pod on the new revision", ROLLOUT, |s| {
        let revs = pod_revs(s, &pods);
        let on_new = revs
            .iter()
            .filter(|r| r.as_deref() == Some(&format!("{new}*")))
            .count();
        let on_old = revs
            .iter()
            .filter(|r| r.as_deref() == Some(old.as_str()))
            .count();
        mixed |= on_new > 0 && on_old > 0;
        header_rev |= s.contains(&format!("update {new}"));
        if let Some((x, y)) = updated_count(s)
            && y == REPLICAS as u32
            && counts.last() != Some(&x)
        {
            counts.push(x);
        }
        on_new == REPLICAS && updated_count(s) == Some((REPLICAS as u32, REPLICAS as u32))
    })
    .await;
    println!("{width}x{height}: updated counts seen {counts:?}; final screen:\n{done_screen}");
    // The counts went down when the revision changed, then up pod by pod.
    let after_change: Vec<u32> = counts
        .iter()
        .copied()
        .skip_while(|&x| x == REPLICAS as u32)
        .collect();
    let distinct: BTreeSet<u32> = after_change.iter().copied().collect();
    assert!(
        after_change.windows(2).all(|w| w[0] <= w[1]) && distinct.len() >= 3,
        "updated counts moved up step by step: {counts:?}"
    );
    assert!(
        mixed,
        "some rows showed {new}* while others still showed {old}"
    );
    if width >= 120 {
        // At 80 columns the namespace pushes the revisions off the header line.
        assert!(header_rev, "header named update revision {new}");
    }
    assert!(
        done_screen.contains(&format!("updated {REPLICAS}/{REPLICAS}")),
        "{done_screen}"
    );

    tmux.key("q").expect("q");
    // Done once the exit code is printed and bash has drawn its prompt again after it.
    let shell = poll_screen(
        &tmux,
        "the shell prompt after q",
        Duration::from_secs(10),
        |s| {
            let mut lines = s.lines().map(str::trim_end).filter(|l| !l.is_empty()).rev();
            let prompt = lines.next() == Some(PROMPT.trim_end());
            let code = lines.next().and_then(|l| l.strip_prefix("EXIT="));
            prompt && code.is_some_and(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()))
        },
    )
    .await;
    println!("{width}x{height}: after q:\n{shell}");
    assert!(
        shell.lines().any(|l| l.trim_end() == "EXIT=0"),
        "exit 0 after q:\n{shell}"
    );
    let leftovers: Vec<&str> = shell
        .lines()
        .filter(|l| {
            [
                "q quit",
                "updated",
                "NAME",
                "│",
                "┌",
                "└",
                "maxUnavailable",
                "current ",
            ]
            .iter()
            .any(|m| l.contains(m))
                || pods.iter().any(|p| l.contains(p.as_str()))
        })
        .collect();
    assert!(
        leftovers.is_empty(),
        "alternate screen left, no UI lines remain: {leftovers:?}\n{shell}"
    );
    drop(tmux);
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn live_view_follows_in_place_rollout_120x40() {
    live_view_follows_rollout(120, 40).await;
}

#[tokio::test]
async fn live_view_follows_in_place_rollout_80x24() {
    live_view_follows_rollout(80, 24).await;
}

/// Runs `rollout watch --exit-when-done` in the terminal and returns the exit code it printed.
async fn watch_until_done(tmux: &Tmux, kk: &Kruise, ns: &str, timeout: Duration) -> String {
    // Clear the previous run's output first, so its EXIT= line is not read again.
    tmux.type_text("clear").expect("type");
    tmux.key("Enter").expect("enter");
    poll_screen(tmux, "a cleared screen", Duration::from_secs(10), |s| {
        !s.contains("EXIT=")
    })
    .await;
    tmux.type_text(&format!(
        "\"{}\" --kubeconfig \"{}\" -n {ns} rollout watch clone/web --exit-when-done; echo \"EXIT=$?\"",
        kk.bin.display(),
        kk.kubeconfig.display()
    ))
    .expect("type");
    tmux.key("Enter").expect("enter");
    let screen = poll_screen(tmux, "the view to exit by itself", timeout, |s| {
        s.lines().any(|l| {
            l.trim_end()
                .strip_prefix("EXIT=")
                .is_some_and(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()))
        })
    })
    .await;
    screen
        .lines()
        .find_map(|l| l.trim_end().strip_prefix("EXIT="))
        .unwrap_or_default()
        .to_string()
}

/// `--exit-when-done` leaves with `rollout status`'s codes, as its help says: 0 once the rollout
/// is complete, 1 once it has failed (the controller refuses an update under InPlaceOnly and sets
/// FailedUpdate).
#[tokio::test]
async fn exit_when_done_exits_0_when_complete_and_1_when_failed() {
    kruise_e2e::cli::binary().expect("kubectl-kruise binary");
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-tui-exit")
        .await
        .expect("test namespace");
    let kk = Kruise::new(&ns.name).expect("kubectl-kruise binary and kubeconfig");
    let api = cloneset::api(&client, &ns.name);
    let strategy = json!({"type": "RollingUpdate",
        "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "partition": 1, "maxUnavailable": 1}});
    api.create(
        &PostParams::default(),
        &cloneset::new("web", 1, "v1", strategy).expect("CloneSet"),
    )
    .await
    .expect("create CloneSet");
    let first = wait_rolled_out(&api, "web", 1, ROLLOUT)
        .await
        .expect("initial rollout");
    let tmux = Tmux::start(100, 30, PROMPT, &[]).expect("tmux session");
    poll_screen(&tmux, "the shell prompt", Duration::from_secs(10), |s| {
        s.contains(PROMPT.trim_end())
    })
    .await;
    let code = watch_until_done(&tmux, &kk, &ns.name, Duration::from_secs(30)).await;
    assert_eq!(code, "0", "a complete rollout exits 0");

    // An env change cannot go in place; admitted under InPlaceIfPossible behind the partition,
    // then the policy becomes InPlaceOnly and the partition goes: the controller refuses.
    cloneset::json_patch(
        &api,
        "web",
        json!([{"op": "add", "path": "/spec/template/spec/containers/0/env", "value": [{"name": "MODE", "value": "b"}]}]),
    )
    .await
    .expect("env change");
    wait_status(&api, "web", "the new revision", ROLLOUT, |cs| {
        status_str(cs, "updateRevision") != status_str(&first, "updateRevision")
    })
    .await
    .expect("new revision");
    cloneset::patch_spec(
        &api,
        "web",
        json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceOnly"}}}),
    )
    .await
    .expect("InPlaceOnly");
    cloneset::patch_spec(
        &api,
        "web",
        json!({"updateStrategy": {"rollingUpdate": {"partition": 0}}}),
    )
    .await
    .expect("partition 0");
    let code = watch_until_done(&tmux, &kk, &ns.name, Duration::from_secs(60)).await;
    assert_eq!(code, "1", "a failed rollout exits 1 (4 is only a timeout)");
    drop(tmux);
    ns.delete().await.expect("delete ns");
}
