//! The live view (`rollout watch`) of the other in-place workloads in a real terminal, as
//! `tui.rs` does for CloneSet: a detached tmux session runs a shell, the view follows a real
//! rollout, and the test reads the screen a user sees.
//!
//! - Advanced StatefulSet with a partition: rows in ordinal order, the partition line between
//!   the kept ordinal and the updated ones, the update revision reaching the highest ordinal
//!   first, the kept ordinal untouched.
//! - Advanced DaemonSet on the real kubelet: one row per node, naming it, updated in place.
//! - SidecarSet over a CloneSet: the matched Pods with their owner, the sidecar hash and image
//!   each runs changing as the upgrade goes; `rollout status sidecarset/NAME` says paused (3)
//!   before and exits 0 after.
//!
//! Needs tmux and the binary (`cargo build -p kubectl-kruise`).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_e2e::cli::{Kruise, Tmux};
use kruise_e2e::sidecarset::{self as sc, Guard};
use kruise_e2e::{TestNamespace, client, cloneset, daemonset, image, statefulset, wait_for};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

const ROLLOUT: Duration = Duration::from_secs(180);
const PROMPT: &str = "e2e$ ";

/// The hash part of a revision as the view prints it: at most 10 characters from 120 columns up,
/// 7 below.
fn short_rev(rev: &str, width: u16) -> String {
    let hash = rev.rsplit('-').next().unwrap_or(rev);
    hash.chars()
        .take(if width >= 120 { 10 } else { 7 })
        .collect()
}

/// The whitespace-separated cells of the row of `pod` (rows start with the pod name):
/// NAME, NODE/OWNER, REV, STATE, READY, IPR, RST, then the images.
fn row<'a>(screen: &'a str, pod: &str) -> Option<Vec<&'a str>> {
    let line = screen
        .lines()
        .find(|l| l.split_whitespace().next() == Some(pod))?;
    Some(line.split_whitespace().collect())
}

/// The index of the screen line whose first cell is `first`.
fn line_of(screen: &str, first: &str) -> Option<usize> {
    screen
        .lines()
        .position(|l| l.split_whitespace().next() == Some(first))
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

/// A shell in a `width`x`height` tmux session running `rollout watch TARGET`; returns once the
/// view shows `ready`.
async fn open_view(
    kk: &Kruise,
    width: u16,
    height: u16,
    target: &str,
    ready: impl FnMut(&str) -> bool,
) -> (Tmux, String) {
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
        "\"$KK\" --kubeconfig \"$KC\" -n {} rollout watch {target}; echo \"EXIT=$?\"",
        kk.namespace
    ))
    .expect("type");
    tmux.key("Enter").expect("enter");
    let screen = poll_screen(
        &tmux,
        &format!("the first view of {target}"),
        Duration::from_secs(30),
        ready,
    )
    .await;
    (tmux, screen)
}

/// Presses `q` and checks the view left with exit 0 and gave the shell its screen back.
async fn quit(tmux: &Tmux, pods: &[String]) {
    tmux.key("q").expect("q");
    let shell = poll_screen(
        tmux,
        "the shell prompt after q",
        Duration::from_secs(10),
        |s| {
            s.lines().any(|l| {
                l.trim_end()
                    .strip_prefix("EXIT=")
                    .is_some_and(|c| !c.is_empty())
            })
        },
    )
    .await;
    assert!(
        shell.lines().any(|l| l.trim_end() == "EXIT=0"),
        "exit 0 after q:\n{shell}"
    );
    let leftovers: Vec<&str> = shell
        .lines()
        .filter(|l| l.contains("q quit") || pods.iter().any(|p| l.contains(p.as_str())))
        .collect();
    assert!(
        leftovers.is_empty(),
        "UI lines remain: {leftovers:?}\n{shell}"
    );
}

async fn setup(client: &Client, prefix: &str) -> (TestNamespace, Kruise) {
    let ns = TestNamespace::create(client, prefix)
        .await
        .expect("test namespace");
    let kk = Kruise::new(&ns.name).expect("kubectl-kruise binary and kubeconfig");
    (ns, kk)
}

/// An Advanced StatefulSet of 3 with partition 1 updated in place while the view watches.
async fn asts_view(width: u16, height: u16) {
    kruise_e2e::cli::binary().expect("kubectl-kruise binary");
    let client = client().await.expect("cluster");
    let (ns, kk) = setup(&client, "e2e-tui-asts").await;
    let api = statefulset::api(&client, &ns.name);
    statefulset::create_headless_service(&client, &ns.name, "db")
        .await
        .expect("headless Service");
    let set = statefulset::new(
        "db",
        3,
        "v1",
        false,
        json!({"podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                "podUpdatePolicy": "InPlaceIfPossible", "partition": 1, "maxUnavailable": 1}}}),
    )
    .expect("StatefulSet");
    api.create(&PostParams::default(), &set)
        .await
        .expect("create StatefulSet");
    let first = statefulset::wait_rolled_out(&api, "db", 3, ROLLOUT)
        .await
        .expect("initial rollout");
    let old_rev = first.data["status"]["updateRevision"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let old = short_rev(&old_rev, width);
    let pods_api: Api<Pod> = ns.api();
    let before = statefulset::pods(&pods_api, "db").await.expect("pods");
    let names: Vec<String> = before.iter().map(|p| p.name_any()).collect();
    assert_eq!(names, ["db-0", "db-1", "db-2"]);

    // Ordinal order with the partition line between db-0 (kept) and db-1.
    let order_ok = |s: &str| {
        let (Some(a), Some(b), Some(c)) =
            (line_of(s, "db-0"), line_of(s, "db-1"), line_of(s, "db-2"))
        else {
            return false;
        };
        let rule = s.lines().position(|l| l.starts_with("── partition 1 "));
        rule.is_some_and(|r| a + 1 == r && r + 1 == b) && b + 1 == c
    };
    let (tmux, start) = open_view(&kk, width, height, "asts/db", |s| {
        order_ok(s)
            && names
                .iter()
                .all(|n| row(s, n).is_some_and(|r| r.get(2) == Some(&format!("{old}*").as_str())))
    })
    .await;
    println!("{width}x{height}: first screen:\n{start}");
    assert!(start.contains("asts/db"), "{start}");
    assert!(start.contains("partition 1"), "{start}");

    statefulset_set_image(&api, "v2").await;
    let changed = statefulset::wait_status(&api, "db", "the new revision", ROLLOUT, |st| {
        st["updateRevision"].as_str() != Some(old_rev.as_str())
    })
    .await
    .expect("new revision");
    let new = short_rev(
        changed.data["status"]["updateRevision"]
            .as_str()
            .unwrap_or_default(),
        width,
    );
    assert_ne!(new, old);

    // Follow the screen: db-2 reaches the update before db-1, db-0 never does, the rows stay in
    // ordinal order around the partition line.
    let mut only_db2 = false;
    let mut out_of_order: Option<String> = None;
    let done = poll_screen(&tmux, "db-1 and db-2 on the new revision", ROLLOUT, |s| {
        let rev = |n: &str| row(s, n).and_then(|r| r.get(2).map(|c| c.to_string()));
        let (r0, r1, r2) = (rev("db-0"), rev("db-1"), rev("db-2"));
        let on_new = |r: &Option<String>| r.as_deref() == Some(format!("{new}*").as_str());
        only_db2 |= on_new(&r2) && !on_new(&r1);
        if (on_new(&r1) && !on_new(&r2)) || on_new(&r0) || !order_ok(s) {
            out_of_order.get_or_insert_with(|| s.to_string());
        }
        on_new(&r1) && on_new(&r2) && s.contains("partitioned rollout complete")
    })
    .await;
    println!("{width}x{height}: final screen:\n{done}");
    assert!(
        out_of_order.is_none(),
        "db-1 updated before db-2, db-0 updated, or rows out of order:\n{}",
        out_of_order.unwrap_or_default()
    );
    assert!(
        only_db2,
        "a screen showed db-2 updated while db-1 was not yet"
    );
    let r0 = row(&done, "db-0").unwrap_or_default();
    assert_eq!(r0.get(2), Some(&old.as_str()), "db-0 kept: {r0:?}");
    assert_eq!(r0.get(6), Some(&"0"), "db-0 never restarted: {r0:?}");
    for n in ["db-1", "db-2"] {
        let r = row(&done, n).unwrap_or_default();
        assert_eq!(r.get(6), Some(&"1"), "{n} restarted once in place: {r:?}");
        assert!(r.iter().any(|c| c.contains("v2✓")), "{n} runs v2: {r:?}");
    }
    assert!(done.contains("updated 2/3 (partition keeps 1)"), "{done}");
    // In place: the same Pods.
    let after = statefulset::pods(&pods_api, "db").await.expect("pods");
    let uids = |ps: &[Pod]| {
        ps.iter()
            .map(|p| p.uid().unwrap_or_default())
            .collect::<Vec<_>>()
    };
    assert_eq!(uids(&after), uids(&before), "same Pods after the update");
    quit(&tmux, &names).await;
    drop(tmux);
    ns.delete().await.expect("delete ns");
}

async fn statefulset_set_image(api: &Api<kube::api::DynamicObject>, tag: &str) {
    cloneset::json_patch(
        api,
        "db",
        json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image",
            "value": image("testapp", tag)}]),
    )
    .await
    .expect("set image");
}

#[tokio::test]
async fn asts_live_view_orders_ordinals_around_the_partition_line_120x40() {
    asts_view(120, 40).await;
}

#[tokio::test]
async fn asts_live_view_orders_ordinals_around_the_partition_line_80x24() {
    asts_view(80, 24).await;
}

/// An Advanced DaemonSet on the real kubelet: one row per node, naming it, updated in place.
async fn ads_view(width: u16, height: u16) {
    kruise_e2e::cli::binary().expect("kubectl-kruise binary");
    let client = client().await.expect("cluster");
    let (ns, kk) = setup(&client, "e2e-tui-ads").await;
    let api = daemonset::api(&client, &ns.name);
    let ds = daemonset::new(
        "agent",
        &image("testapp", "v1"),
        json!({"type": "RollingUpdate", "rollingUpdate": {"rollingUpdateType": "InPlaceIfPossible"}}),
        json!({}),
    )
    .expect("DaemonSet");
    api.create(&PostParams::default(), &ds)
        .await
        .expect("create DaemonSet");
    let first = daemonset::wait_rolled_out(&api, "agent", None, ROLLOUT)
        .await
        .expect("initial rollout");
    let desired = daemonset::status_i64(&first, "desiredNumberScheduled");
    let old = short_rev(&ds_rev(&first), width);
    let pods_api: Api<Pod> = ns.api();
    let before = daemonset::pods(&pods_api, "agent").await.expect("pods");
    assert_eq!(before.len() as i64, desired, "one Pod per node");
    let nodes: Vec<(String, String)> = before
        .iter()
        .map(|p| (p.name_any(), daemonset::pod_node(p)))
        .collect();
    let names: Vec<String> = nodes.iter().map(|(n, _)| n.clone()).collect();
    // Each Pod's row names its node in full, and there is no other Pod row.
    let rows_ok = |s: &str, rev: &str| {
        nodes.iter().all(|(pod, node)| {
            row(s, pod).is_some_and(|r| r.get(1) == Some(&node.as_str()) && r.get(2) == Some(&rev))
        }) && s.contains(&format!(" 1/{desired} "))
    };
    let old_marked = format!("{old}*");
    let (tmux, start) =
        open_view(&kk, width, height, "ads/agent", |s| rows_ok(s, &old_marked)).await;
    println!("{width}x{height}: first screen:\n{start}");
    assert!(start.contains("ads/agent"), "{start}");

    daemonset::set_image(&api, "agent", &image("testapp", "v2"))
        .await
        .expect("set image");
    let changed = daemonset::wait_status(&api, "agent", "the new revision", ROLLOUT, |ds| {
        short_rev(&ds_rev(ds), width) != old
    })
    .await
    .expect("new revision");
    let new = short_rev(&ds_rev(&changed), width);
    let new_marked = format!("{new}*");
    let done = poll_screen(
        &tmux,
        "every node's Pod on the new revision",
        ROLLOUT,
        |s| {
            rows_ok(s, &new_marked)
                && names.iter().all(|n| {
                    row(s, n).is_some_and(|r| {
                        r.get(6) == Some(&"1") && r.iter().any(|c| c.contains("v2✓"))
                    })
                })
                && s.contains("successfully rolled out")
        },
    )
    .await;
    println!("{width}x{height}: final screen:\n{done}");
    let after = daemonset::pods(&pods_api, "agent").await.expect("pods");
    let uids = |ps: &[Pod]| {
        ps.iter()
            .map(|p| p.uid().unwrap_or_default())
            .collect::<Vec<_>>()
    };
    assert_eq!(uids(&after), uids(&before), "updated in place: same Pods");
    quit(&tmux, &names).await;
    drop(tmux);
    ns.delete().await.expect("delete ns");
}

/// The DaemonSet's update revision: v1beta1's `updateRevision`, else the `daemonSetHash`.
fn ds_rev(ds: &kube::api::DynamicObject) -> String {
    let rev = daemonset::status_str(ds, "updateRevision");
    if rev.is_empty() {
        daemonset::status_str(ds, "daemonSetHash").to_string()
    } else {
        rev.to_string()
    }
}

#[tokio::test]
async fn ads_live_view_one_row_per_node_120x40() {
    ads_view(120, 40).await;
}

#[tokio::test]
async fn ads_live_view_one_row_per_node_80x24() {
    ads_view(80, 24).await;
}

/// The hash a Pod records for the SidecarSet `set`.
fn pod_sidecar_hash(pod: &Pod, set: &str) -> String {
    kruise_api::sidecarset::pod_hash(
        pod.metadata.annotations.as_ref(),
        keys::SIDECARSET_HASH_ANNOTATION,
        set,
    )
    .unwrap_or_default()
}

/// A SidecarSet over a CloneSet of 3: paused with a new image (status says paused), then
/// resumed while the view shows each Pod's owner and sidecar version change; status exits 0.
async fn sidecarset_view(width: u16, height: u16) {
    const REPLICAS: usize = 3;
    kruise_e2e::cli::binary().expect("kubectl-kruise binary");
    let client = client().await.expect("cluster");
    let (ns, kk) = setup(&client, "e2e-tui-sc").await;
    let set_name = format!("{}-log", ns.name);
    let set = sc::new(
        &set_name,
        &ns.name,
        "web",
        json!({"containers": [{"name": "log", "image": image("sidecar", "v1")}],
            "updateStrategy": {"maxUnavailable": 1}}),
    )
    .expect("SidecarSet");
    let (guard, _) = Guard::create(&client, &set)
        .await
        .expect("create SidecarSet");
    let cs_api = cloneset::api(&client, &ns.name);
    cs_api
        .create(
            &PostParams::default(),
            &cloneset::new("web", REPLICAS as i32, "v1", json!({})).expect("CloneSet"),
        )
        .await
        .expect("create CloneSet");
    cloneset::wait_rolled_out(&cs_api, "web", REPLICAS as i64, ROLLOUT)
        .await
        .expect("CloneSet ready");
    let sets = sc::api(&client);
    wait_for("the SidecarSet to count its Pods", ROLLOUT, || async {
        let s = sets.get(&set_name).await?;
        let st = s.status.clone().unwrap_or_default();
        Ok(
            (st.matched_pods == REPLICAS as i32 && st.updated_ready_pods == REPLICAS as i32)
                .then_some(()),
        )
    })
    .await
    .expect("SidecarSet status");
    let pods_api: Api<Pod> = ns.api();
    let before = cloneset::pods(&pods_api, "web").await.expect("pods");
    let names: Vec<String> = before.iter().map(|p| p.name_any()).collect();
    let old_hash = pod_sidecar_hash(&before[0], &set_name);
    assert!(!old_hash.is_empty(), "the Pods record the sidecar hash");

    // Paused, then the new image: nothing may upgrade yet and status says so.
    sc::patch_spec(
        &sets,
        &set_name,
        json!({"updateStrategy": {"paused": true}}),
    )
    .await
    .expect("pause");
    // Only the image changes (a JSON patch keeps the rest of the container as it is).
    sets.patch(
        &set_name,
        &PatchParams::default(),
        &Patch::<()>::Json(
            serde_json::from_value(json!([{"op": "replace", "path": "/spec/containers/0/image",
                "value": image("sidecar", "v2")}]))
            .expect("patch"),
        ),
    )
    .await
    .expect("new sidecar image");
    let new_hash = wait_for("the SidecarSet's new hash, observed", ROLLOUT, || async {
        let s = sets.get(&set_name).await?;
        let observed = s.status.as_ref().map(|st| st.observed_generation);
        let hash = s
            .annotations()
            .get(keys::SIDECARSET_HASH_ANNOTATION)
            .cloned()
            .unwrap_or_default();
        Ok(
            (observed == s.metadata.generation && !hash.is_empty() && hash != old_hash)
                .then_some(hash),
        )
    })
    .await
    .expect("new hash");
    let target = format!("sidecarset/{set_name}");
    let paused = kk
        .run(&["rollout", "status", &target, "--watch=false"])
        .await
        .expect("rollout status");
    assert_eq!(paused.code, Some(3), "paused before the upgrade: {paused}");
    assert!(
        paused
            .stderr
            .contains("rollout paused with 0 of 3 expected pods updated"),
        "{paused}"
    );

    let (old, new) = (short_rev(&old_hash, width), short_rev(&new_hash, width));
    let new_marked = format!("{new}*");
    let (tmux, start) = open_view(&kk, width, height, &target, |s| {
        names.iter().all(|n| {
            row(s, n).is_some_and(|r| {
                r.get(1) == Some(&"CloneSet/web")
                    && r.get(2) == Some(&old.as_str())
                    && r.get(7).is_some_and(|c| c.starts_with("log=sidecar:v1"))
            })
        })
    })
    .await;
    println!("{width}x{height}: first screen:\n{start}");
    assert!(start.contains("paused"), "{start}");
    assert!(start.contains("cluster-scoped"), "{start}");

    sc::patch_spec(
        &sets,
        &set_name,
        json!({"updateStrategy": {"paused": false}}),
    )
    .await
    .expect("resume");
    let mut mixed = false;
    let done = poll_screen(&tmux, "every Pod on the new sidecar", ROLLOUT, |s| {
        let rows: Vec<Vec<&str>> = names.iter().filter_map(|n| row(s, n)).collect();
        let upgraded = |r: &Vec<&str>| {
            r.get(2) == Some(&new_marked.as_str())
                && r.get(7).is_some_and(|c| c.starts_with("log=sidecar:v2✓"))
        };
        let on_old = rows
            .iter()
            .filter(|r| r.get(2) == Some(&old.as_str()))
            .count();
        let on_new = rows.iter().filter(|r| upgraded(r)).count();
        mixed |= on_new > 0 && on_old > 0;
        rows.len() == REPLICAS
            && on_new == REPLICAS
            && rows.iter().all(|r| r.get(1) == Some(&"CloneSet/web"))
            // The message may be cut at 80 columns; the icon says complete.
            && s.lines().next().is_some_and(|l| l.contains('✔'))
    })
    .await;
    println!("{width}x{height}: final screen:\n{done}");
    assert!(
        mixed,
        "some rows showed the new sidecar while others still ran the old one"
    );
    assert!(
        done.contains("owner: CloneSet/web") && done.contains("pod sidecars"),
        "the selected Pod's sidecar panel: {done}"
    );
    let status = kk
        .run_for(&["rollout", "status", &target, "--timeout", "60s"], ROLLOUT)
        .await
        .expect("rollout status");
    assert_eq!(status.code, Some(0), "{status}");
    assert!(
        status.stdout.contains("successfully rolled out"),
        "{status}"
    );
    let after = cloneset::pods(&pods_api, "web").await.expect("pods");
    let uids = |ps: &[Pod]| {
        let mut v: Vec<String> = ps.iter().map(|p| p.uid().unwrap_or_default()).collect();
        v.sort();
        v
    };
    assert_eq!(
        uids(&after),
        uids(&before),
        "sidecars upgraded in place: same Pods"
    );
    quit(&tmux, &names).await;
    drop(tmux);
    guard.delete().await.expect("delete SidecarSet");
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn sidecarset_live_view_and_status_follow_the_upgrade_120x40() {
    sidecarset_view(120, 40).await;
}

#[tokio::test]
async fn sidecarset_live_view_and_status_follow_the_upgrade_80x24() {
    sidecarset_view(80, 24).await;
}
