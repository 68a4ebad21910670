//! Image pre-pulling end to end: ImagePullJob → NodeImage spec (kruise-manager) → CRI pull and
//! NodeImage status (kruise-daemon) → job status. Outcomes are checked against CRI itself. Each
//! test has its own namespace; image tags are pushed fresh so the node cannot have them yet.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::features::Gate;
use kruise_api::keys;
use kruise_e2e::cloneset::{self, set_image, status_str, wait_rolled_out, wait_status};
use kruise_e2e::cri::{self, push_unique_image, unique_tag};
use kruise_e2e::manager;
use kruise_e2e::{TestNamespace, client, image, mode, wait_for};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

const PULL: Duration = Duration::from_secs(120);
/// The daemon only reports intermediate progress while it runs a single pull (containerd's
/// ingests do not say which pull they belong to), so the progress test runs alone: in the suite's
/// serial phase (its name says so), and, where this file's tests share one process (`cargo
/// test`), under this lock, which every other test here shares and the progress test takes
/// exclusively.
static PULLS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(keys::APPS_GROUP, keys::VERSION_V1BETA1, kind),
        plural,
    )
}

fn jobs(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &resource("ImagePullJob", "imagepulljobs"),
    )
}

fn node_images(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &resource("NodeImage", "nodeimages"))
}

/// The node the suite runs on (the local cluster has one).
async fn node_name(client: &Client) -> String {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodes");
    nodes.items.first().expect("a node").name_any()
}

fn split(full: &str) -> (&str, &str) {
    full.rsplit_once(':').expect("image:tag")
}

/// An ImagePullJob of `image` on `node`; `extra` is merged into the spec.
fn pull_job(name: &str, image: &str, node: &str, extra: Value) -> DynamicObject {
    let mut spec = json!({"image": image, "selector": {"names": [node]}});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "apiVersion": keys::APPS_V1BETA1, "kind": "ImagePullJob",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("job json")
}

/// The NodeImage status of one tag.
fn tag_status(ni: &DynamicObject, full: &str) -> Option<Value> {
    let (name, tag) = split(full);
    ni.data["status"]["imageStatuses"][name]["tags"]
        .as_array()?
        .iter()
        .find(|t| t["tag"] == tag)
        .cloned()
}

/// Waits until the tag's status on the node reaches a final phase.
async fn wait_tag_done(client: &Client, node: &str, full: &str, timeout: Duration) -> Value {
    let nis = node_images(client);
    let r = wait_for(&format!("{full} done on {node}"), timeout, || async {
        let ni = nis.get(node).await?;
        Ok(tag_status(&ni, full).filter(|s| s["phase"] == "Succeeded" || s["phase"] == "Failed"))
    })
    .await;
    match r {
        Ok(v) => v,
        Err(e) => {
            // Say where it got stuck: the tag's last status.
            let last = nis
                .get(node)
                .await
                .ok()
                .and_then(|ni| tag_status(&ni, full));
            panic!("{e}; tag status: {last:?}")
        }
    }
}

/// Waits until the job has a completionTime and returns its status.
async fn wait_job_done(api: &Api<DynamicObject>, name: &str) -> Value {
    wait_for(&format!("ImagePullJob {name} finished"), PULL, || async {
        let j = api.get(name).await?;
        Ok((!j.data["status"]["completionTime"].is_null()).then(|| j.data["status"].clone()))
    })
    .await
    .expect("job finished")
}

fn secs(t: &Value) -> i64 {
    serde_json::from_value::<Time>(t.clone())
        .map(|t| t.0.as_second())
        .unwrap_or(0)
}

/// a: a tag absent from the node is pulled: Succeeded with the imageID CRI reports, the job
/// counts it, and ttlSecondsAfterFinished deletes the job afterwards.
#[tokio::test]
async fn pull_job_pulls_missing_tag_then_expires() {
    let _pulls = PULLS.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ipj-pull")
        .await
        .expect("ns");
    let node = node_name(&client).await;
    let cri = cri::connect().await.expect("CRI");
    let full = push_unique_image(&unique_tag("ipj-a"), 4096).expect("push");
    assert_eq!(
        cri::image_id(&cri, &full).await.expect("CRI"),
        None,
        "fresh tag absent"
    );

    let api = jobs(&client, &ns.name);
    let job = pull_job(
        "pull",
        &full,
        &node,
        json!({"completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 10}}),
    );
    api.create(&PostParams::default(), &job)
        .await
        .expect("create job");

    let st = wait_tag_done(&client, &node, &full, PULL).await;
    let cri_id = cri::image_id(&cri, &full)
        .await
        .expect("CRI")
        .expect("pulled");
    assert_eq!(st["phase"], "Succeeded", "{st}");
    assert_eq!(st["imageID"].as_str(), Some(cri_id.as_str()), "{st}");
    assert_eq!(st["progress"], 100, "{st}");

    let js = wait_job_done(&api, "pull").await;
    assert_eq!(
        (
            &js["desired"],
            &js["succeeded"],
            &js["failed"],
            &js["active"]
        ),
        (&json!(1), &json!(1), &json!(0), &json!(0)),
        "{js}"
    );
    wait_for(
        "the job deleted after its TTL",
        Duration::from_secs(60),
        || async { Ok(api.get_opt("pull").await?.is_none().then_some(())) },
    )
    .await
    .expect("TTL");
    ns.delete().await.expect("delete ns");
}

/// b: a tag the registry does not have fails after the backoff limit with the registry's error;
/// a good tag of the same image in the same NodeImage is not affected.
#[tokio::test]
async fn missing_tag_fails_without_hurting_others() {
    let _pulls = PULLS.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ipj-fail")
        .await
        .expect("ns");
    let node = node_name(&client).await;
    let cri = cri::connect().await.expect("CRI");
    let good = push_unique_image(&unique_tag("ipj-b-ok"), 4096).expect("push");
    let missing = image("testapp", &unique_tag("ipj-b-missing"));

    let api = jobs(&client, &ns.name);
    let backoff = json!({"pullPolicy": {"backoffLimit": 2, "timeoutSeconds": 60}});
    api.create(
        &PostParams::default(),
        &pull_job("bad", &missing, &node, backoff.clone()),
    )
    .await
    .expect("create bad job");
    api.create(
        &PostParams::default(),
        &pull_job("good", &good, &node, backoff),
    )
    .await
    .expect("create good job");

    let bad = wait_tag_done(&client, &node, &missing, PULL).await;
    assert_eq!(bad["phase"], "Failed", "{bad}");
    let msg = bad["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("not found"),
        "registry's error in the message: {bad}"
    );
    // Three attempts with 1 s and 2 s between them.
    let took = secs(&bad["completionTime"]) - secs(&bad["startTime"]);
    assert!(took >= 3, "failed only after the retries ({took}s): {bad}");

    let ok = wait_tag_done(&client, &node, &good, PULL).await;
    assert_eq!(ok["phase"], "Succeeded", "{ok}");
    let cri_id = cri::image_id(&cri, &good)
        .await
        .expect("CRI")
        .expect("pulled");
    assert_eq!(ok["imageID"].as_str(), Some(cri_id.as_str()));
    // Both tags sit under the same image in the one NodeImage.
    let ni = node_images(&client).get(&node).await.expect("NodeImage");
    assert!(tag_status(&ni, &good).is_some() && tag_status(&ni, &missing).is_some());

    let bs = wait_job_done(&api, "bad").await;
    assert_eq!(
        (&bs["succeeded"], &bs["failed"]),
        (&json!(0), &json!(1)),
        "{bs}"
    );
    let gs = wait_job_done(&api, "good").await;
    assert_eq!(
        (&gs["succeeded"], &gs["failed"]),
        (&json!(1), &json!(0)),
        "{gs}"
    );
    ns.delete().await.expect("delete ns");
}

fn rss_kb(pid: i32) -> String {
    Command::new("ps")
        .args(["-o", "rss=", "-p", &pid.to_string()])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// c: the daemon SIGKILLed while it pulls, then brought back the way the mode allows (dev mode:
/// hack/dev-up.sh; in cluster: its Pod deleted and recreated by the DaemonSet): the pull finishes
/// and the status is right.
#[tokio::test]
async fn serial_daemon_killed_mid_pull_recovers() {
    let _pulls = PULLS.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ipj-kill")
        .await
        .expect("ns");
    let node = node_name(&client).await;
    let cri = cri::connect().await.expect("CRI");
    // Big and incompressible, so the pull lasts long enough to be interrupted.
    let full = push_unique_image(&unique_tag("ipj-c"), 384 << 20).expect("push");
    let pid = mode::daemon_pid().expect("the daemon's process");
    println!("daemon RSS idle: {} kB", rss_kb(pid));

    let api = jobs(&client, &ns.name);
    api.create(
        &PostParams::default(),
        &pull_job("pull", &full, &node, json!({})),
    )
    .await
    .expect("create job");
    let nis = node_images(&client);
    wait_for("the daemon to report Pulling", PULL, || async {
        let ni = nis.get(&node).await?;
        Ok(tag_status(&ni, &full)
            .filter(|s| s["phase"] == "Pulling")
            .map(|_| ()))
    })
    .await
    .expect("Pulling");
    println!("daemon RSS while pulling: {} kB", rss_kb(pid));
    mode::crash_daemon(&client, async || {
        let present_at_kill = cri::image_id(&cri, &full).await.expect("CRI");
        assert_eq!(
            present_at_kill, None,
            "the daemon was killed before the pull finished"
        );
    })
    .await
    .expect("the daemon is killed and comes back");

    let st = wait_tag_done(&client, &node, &full, Duration::from_secs(300)).await;
    assert_eq!(st["phase"], "Succeeded", "{st}");
    let cri_id = cri::image_id(&cri, &full)
        .await
        .expect("CRI")
        .expect("pulled");
    assert_eq!(st["imageID"].as_str(), Some(cri_id.as_str()), "{st}");
    let js = wait_job_done(&api, "pull").await;
    assert_eq!(
        (&js["succeeded"], &js["failed"]),
        (&json!(1), &json!(0)),
        "{js}"
    );
    ns.delete().await.expect("delete ns");
    // Hundreds of MB per run: not worth keeping on a shared node.
    cri::remove_image(&full).expect("remove the big image");
}

/// d: a big pull through containerd shows progress strictly between 0 and 100 in the NodeImage
/// status while it runs (read from containerd's content ingests), then 100 on success.
#[tokio::test]
async fn serial_big_pull_reports_intermediate_progress() {
    let _alone = PULLS.write().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ipj-progress")
        .await
        .expect("ns");
    let node = node_name(&client).await;
    // Status is written at most once a second, and 384 MiB pull from the local registry in about
    // 2 s on an idle machine, which left room for a single intermediate value (once none at all):
    // twice the size gives the pull several writes.
    let full = push_unique_image(&unique_tag("ipj-p"), 768 << 20).expect("push");
    let api = jobs(&client, &ns.name);
    api.create(
        &PostParams::default(),
        &pull_job("pull", &full, &node, json!({})),
    )
    .await
    .expect("create job");
    // Status writes are at most one a second; polling faster sees each of them.
    let nis = node_images(&client);
    let mut seen: Vec<i64> = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let last = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "{full} not done within 300 s; progress seen {seen:?}"
        );
        let st = match nis.get(&node).await {
            Ok(ni) => tag_status(&ni, &full),
            // Transient API errors: the next round retries.
            Err(_) => None,
        };
        if let Some(st) = st {
            let p = st["progress"].as_i64().unwrap_or(0);
            if seen.last() != Some(&p) {
                seen.push(p);
            }
            if st["phase"] == "Succeeded" || st["phase"] == "Failed" {
                break st;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    println!("progress values seen: {seen:?}");
    assert_eq!(last["phase"], "Succeeded", "{last}");
    assert_eq!(last["progress"], 100, "{last}");
    assert!(
        seen.iter().any(|p| *p > 0 && *p < 100),
        "no intermediate progress seen: {seen:?}"
    );
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]),
        "progress went back: {seen:?}"
    );
    ns.delete().await.expect("delete ns");
    cri::remove_image(&full).expect("remove the big image");
}

/// The node's NodeImage exists with the node's labels; once a job is deleted, its tag leaves the
/// NodeImage spec (the manager drops tags whose owners are gone).
#[tokio::test]
async fn node_image_follows_node_and_drops_orphan_tags() {
    let _pulls = PULLS.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ni-orphan")
        .await
        .expect("ns");
    let node = node_name(&client).await;
    let n = Api::<Node>::all(client.clone())
        .get(&node)
        .await
        .expect("node");
    let ni = node_images(&client)
        .get(&node)
        .await
        .expect("NodeImage of the node");
    assert_eq!(ni.labels(), n.labels(), "NodeImage labels = node labels");

    let full = push_unique_image(&unique_tag("ni-orphan"), 4096).expect("push");
    let api = jobs(&client, &ns.name);
    api.create(
        &PostParams::default(),
        &pull_job("pull", &full, &node, json!({})),
    )
    .await
    .expect("create job");
    wait_job_done(&api, "pull").await;
    let uid = api.get("pull").await.expect("job").uid().expect("uid");
    let (name, tag) = split(&full);
    let owned_by_job = |ni: &DynamicObject| {
        ni.data["spec"]["images"][name]["tags"]
            .as_array()
            .is_some_and(|tags| {
                tags.iter().any(|t| {
                    t["tag"] == tag
                        && t["ownerReferences"]
                            .as_array()
                            .is_some_and(|o| o.iter().any(|r| r["uid"] == uid.as_str()))
                })
            })
    };
    assert!(owned_by_job(
        &node_images(&client).get(&node).await.expect("ni")
    ));
    api.delete("pull", &DeleteParams::default())
        .await
        .expect("delete job");
    wait_for("the job's tag dropped from the NodeImage", PULL, || async {
        let ni = node_images(&client).get(&node).await?;
        Ok((!owned_by_job(&ni)).then_some(()))
    })
    .await
    .expect("orphan tag removed");
    ns.delete().await.expect("delete ns");
}

/// An ImageListPullJob creates one ImagePullJob per image and aggregates their results.
#[tokio::test]
async fn image_list_pull_job_fans_out_and_aggregates() {
    let _pulls = PULLS.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ilpj")
        .await
        .expect("ns");
    let node = node_name(&client).await;
    let lists: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns.name,
        &resource("ImageListPullJob", "imagelistpulljobs"),
    );
    let list: DynamicObject = serde_json::from_value(json!({
        "apiVersion": keys::APPS_V1BETA1, "kind": "ImageListPullJob",
        "metadata": {"name": "images"},
        "spec": {
            "images": [image("testapp", "v2"), image("sidecar", "v1")],
            "selector": {"names": [node]}
        }
    }))
    .expect("list json");
    lists
        .create(&PostParams::default(), &list)
        .await
        .expect("create list");
    let st = wait_for("ImageListPullJob finished", PULL, || async {
        let l = lists.get("images").await?;
        Ok((!l.data["status"]["completionTime"].is_null()).then(|| l.data["status"].clone()))
    })
    .await
    .expect("list finished");
    assert_eq!(
        (&st["desired"], &st["completed"], &st["succeeded"]),
        (&json!(2), &json!(2), &json!(2)),
        "{st}"
    );
    let owned = jobs(&client, &ns.name)
        .list(&ListParams::default())
        .await
        .expect("jobs")
        .items;
    let mut images: Vec<String> = owned
        .iter()
        .map(|j| j.data["spec"]["image"].as_str().unwrap_or("").to_string())
        .collect();
    images.sort();
    assert_eq!(images, vec![image("sidecar", "v1"), image("testapp", "v2")]);
    assert!(owned.iter().all(|j| j.name_any().starts_with("images-")));
    ns.delete().await.expect("delete ns");
}

/// f: with `PreDownloadImageForInPlaceUpdate` on (off by default, as upstream: a gated-phase
/// test), a CloneSet image change that
/// will not update every Pod at once first creates a pre-download ImagePullJob (named
/// `<update revision>-<container>`) for the new image on the Pods' nodes.
#[tokio::test]
async fn gated_cloneset_image_change_predownloads_first_with_the_gate() {
    let _pulls = PULLS.read().await;
    let client = client().await.expect("cluster");
    manager::require_gates(&client, &[Gate::PreDownloadImageForInPlaceUpdate])
        .await
        .expect("the gated phase's manager");
    let ns = TestNamespace::create(&client, "e2e-ipj-predl")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let strategy = json!({"type": "RollingUpdate", "rollingUpdate": {
        "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}});
    api.create(
        &PostParams::default(),
        &cloneset::new("web", 5, "v1", strategy).expect("cs"),
    )
    .await
    .expect("create CloneSet");
    let first = wait_rolled_out(&api, "web", 5, Duration::from_secs(180))
        .await
        .expect("initial rollout");

    let watch = Writes::start(&client, &ns.name).await;
    set_image(&api, "web", "v3").await.expect("set image");
    let cs = wait_status(&api, "web", "a new update revision", PULL, |cs| {
        status_str(cs, "updateRevision") != status_str(&first, "updateRevision")
    })
    .await
    .expect("new revision");
    let update = status_str(&cs, "updateRevision").to_string();
    let job_name = format!("{update}-app");
    let api_jobs = jobs(&client, &ns.name);
    let job = wait_for(
        &format!("pre-download job {job_name}"),
        Duration::from_secs(60),
        || async { Ok(api_jobs.get_opt(&job_name).await?) },
    )
    .await
    .expect("pre-download job");
    assert_eq!(
        job.data["spec"]["image"].as_str(),
        Some(image("testapp", "v3").as_str())
    );
    assert!(
        job.owner_references()
            .iter()
            .any(|o| o.kind == "CloneSet" && o.name == "web" && o.controller == Some(true)),
        "owned by the CloneSet: {:?}",
        job.owner_references()
    );
    // Created before the first Pod moved to the new revision. etcd revisions order all writes,
    // so the job's creation resourceVersion is compared with the Pods' first update to it.
    let job_rv = watch.first_rv(|s| s.kind == "job" && s.name == job_name);
    let pod_rv = watch.first_rv(|s| s.kind == "pod" && s.revision == update);
    assert!(
        matches!((job_rv, pod_rv), (Some(j), Some(p)) if j < p)
            || (job_rv.is_some() && pod_rv.is_none()),
        "job created at rv {job_rv:?}, first pod updated at rv {pod_rv:?}"
    );
    let rev = Api::<ControllerRevision>::namespaced(client.clone(), &ns.name)
        .get(&update)
        .await
        .expect("update revision");
    assert!(
        rev.labels()
            .contains_key(keys::IMAGE_PREDOWNLOAD_CREATED_LABEL),
        "revision labelled: {:?}",
        rev.labels()
    );
    let js = wait_job_done(&api_jobs, &job_name).await;
    assert_eq!(js["failed"], 0, "{js}");
    wait_rolled_out(&api, "web", 5, Duration::from_secs(240))
        .await
        .expect("rollout");
    ns.delete().await.expect("delete ns");
}

/// The same for Advanced DaemonSet, under its own gate `PreDownloadImageForDaemonSetUpdate`: an
/// image change held by the partition first gets an ImagePullJob for the new image on the nodes
/// of the Pods not updated yet; once the rollout settles the job is removed.
#[tokio::test]
async fn gated_daemonset_image_change_predownloads_first_with_the_gate() {
    use kruise_e2e::daemonset;
    let _pulls = PULLS.read().await;
    let client = client().await.expect("cluster");
    manager::require_gates(&client, &[Gate::PreDownloadImageForDaemonSetUpdate])
        .await
        .expect("the gated phase's manager");
    let ns = TestNamespace::create(&client, "e2e-ipj-ads-predl")
        .await
        .expect("ns");
    let api = daemonset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let strategy = json!({"type": "RollingUpdate", "rollingUpdate": {
        "rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 1}});
    api.create(
        &PostParams::default(),
        &daemonset::new("agent", &image("testapp", "v1"), strategy, json!({})).expect("ds"),
    )
    .await
    .expect("create DaemonSet");
    let first = daemonset::wait_rolled_out(&api, "agent", None, Duration::from_secs(180))
        .await
        .expect("initial rollout");
    let nodes = daemonset::status_i64(&first, "desiredNumberScheduled");
    let before = daemonset::pods(&pods, "agent").await.expect("pods");

    // The partition holds every Pod, so whatever the job does happens before any Pod update.
    daemonset::patch_spec(
        &api,
        "agent",
        json!({"updateStrategy": {"rollingUpdate": {"partition": nodes}},
               "template": {"spec": {"containers": [{"name": "app", "image": image("testapp", "v3")}]}}}),
    )
    .await
    .expect("partition and image");
    let held = daemonset::wait_status(&api, "agent", "a new update revision", PULL, |d| {
        daemonset::status_str(d, "updateRevision")
            != daemonset::status_str(&first, "updateRevision")
    })
    .await
    .expect("new revision");
    let hash = daemonset::status_str(&held, "updateRevision").to_string();
    let revisions = Api::<ControllerRevision>::namespaced(client.clone(), &ns.name);
    let rev = revisions
        .list(&ListParams::default())
        .await
        .expect("revisions")
        .items
        .into_iter()
        .find(|r| r.labels().get("controller-revision-hash") == Some(&hash))
        .expect("the update revision");
    let update = rev.name_any();
    let job_name = format!("{update}-app");
    let api_jobs = jobs(&client, &ns.name);
    let job = wait_for(
        &format!("pre-download job {job_name}"),
        Duration::from_secs(60),
        || async { Ok(api_jobs.get_opt(&job_name).await?) },
    )
    .await
    .expect("pre-download job");
    assert_eq!(
        job.data["spec"]["image"].as_str(),
        Some(image("testapp", "v3").as_str())
    );
    assert!(
        job.owner_references()
            .iter()
            .any(|o| o.kind == "DaemonSet" && o.name == "agent" && o.controller == Some(true)),
        "owned by the DaemonSet: {:?}",
        job.owner_references()
    );
    let during = daemonset::pods(&pods, "agent").await.expect("pods");
    for (b, d) in before.iter().zip(&during) {
        assert_eq!(
            (d.uid(), d.labels().get("controller-revision-hash")),
            (b.uid(), b.labels().get("controller-revision-hash")),
            "no Pod updated before the job"
        );
    }
    let rev = revisions.get(&update).await.expect("update revision");
    assert!(
        rev.labels()
            .contains_key(keys::IMAGE_PREDOWNLOAD_CREATED_LABEL),
        "revision labelled: {:?}",
        rev.labels()
    );
    let js = wait_job_done(&api_jobs, &job_name).await;
    assert_eq!(js["failed"], 0, "{js}");
    assert_eq!(js["succeeded"], nodes, "pulled on every node: {js}");

    daemonset::patch_spec(
        &api,
        "agent",
        json!({"updateStrategy": {"rollingUpdate": {"partition": 0}}}),
    )
    .await
    .expect("release");
    daemonset::wait_rolled_out(&api, "agent", Some(nodes), Duration::from_secs(180))
        .await
        .expect("rollout");
    // Settled: the DaemonSet's jobs are removed.
    wait_for(
        "the pre-download job removed",
        Duration::from_secs(60),
        || async { Ok(api_jobs.get_opt(&job_name).await?.is_none().then_some(())) },
    )
    .await
    .expect("job removed once the rollout settled");
    ns.delete().await.expect("delete ns");
}

/// f, upstream's default: with `PreDownloadImageForInPlaceUpdate` off (as shipped), the same
/// image change updates the Pods in place and creates no ImagePullJob at all.
#[tokio::test]
async fn cloneset_image_change_creates_no_pull_job_without_the_gate() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ipj-nopredl")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let strategy = json!({"type": "RollingUpdate", "rollingUpdate": {
        "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}});
    api.create(
        &PostParams::default(),
        &cloneset::new("web", 3, "v1", strategy).expect("cs"),
    )
    .await
    .expect("create CloneSet");
    let first = wait_rolled_out(&api, "web", 3, Duration::from_secs(180))
        .await
        .expect("initial rollout");
    let pods: Api<Pod> = ns.api();
    let before = cloneset::pods(&pods, "web").await.expect("pods");
    set_image(&api, "web", "v3").await.expect("set image");
    wait_status(&api, "web", "a new update revision", PULL, |cs| {
        status_str(cs, "updateRevision") != status_str(&first, "updateRevision")
    })
    .await
    .expect("new revision");
    wait_rolled_out(&api, "web", 3, Duration::from_secs(240))
        .await
        .expect("rollout");
    let after = cloneset::pods(&pods, "web").await.expect("pods");
    let uids = |ps: &[Pod]| {
        let mut u: Vec<String> = ps.iter().filter_map(|p| p.uid()).collect();
        u.sort();
        u
    };
    assert_eq!(uids(&after), uids(&before), "updated in place");
    let listed = jobs(&client, &ns.name)
        .list(&ListParams::default())
        .await
        .expect("list ImagePullJobs");
    assert!(
        listed.items.is_empty(),
        "no ImagePullJob without the gate, found {:?}",
        listed
            .items
            .iter()
            .map(|j| j.name_any())
            .collect::<Vec<_>>()
    );
    ns.delete().await.expect("delete ns");
}

/// One write seen by [`Writes`]: a Pod's revision label or a job's existence, at an etcd revision.
#[derive(Clone, Debug)]
struct Write {
    kind: &'static str,
    name: String,
    rv: u64,
    revision: String,
}

/// Watches a namespace's Pods and ImagePullJobs and keeps every version seen, to order them.
struct Writes {
    seen: Arc<Mutex<Vec<Write>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Writes {
    async fn start(client: &Client, ns: &str) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let ready = Arc::new(AtomicUsize::new(0));
        let pods = watch_into::<Pod>(Api::namespaced(client.clone(), ns), "pod", &seen, &ready);
        let jobs = watch_into::<DynamicObject>(jobs(client, ns), "job", &seen, &ready);
        // Both initial lists must be in, so later writes arrive as changes with their own rv.
        wait_for("watches started", Duration::from_secs(30), || async {
            Ok((ready.load(Ordering::SeqCst) == 2).then_some(()))
        })
        .await
        .expect("watches");
        Self {
            seen,
            tasks: vec![pods, jobs],
        }
    }

    fn first_rv(&self, f: impl Fn(&Write) -> bool) -> Option<u64> {
        let seen = self.seen.lock().map(|v| v.clone()).unwrap_or_default();
        seen.iter().filter(|w| f(w)).map(|w| w.rv).min()
    }
}

impl Drop for Writes {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn watch_into<K>(
    api: Api<K>,
    kind: &'static str,
    seen: &Arc<Mutex<Vec<Write>>>,
    ready: &Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let (seen, ready) = (seen.clone(), ready.clone());
    tokio::spawn(async move {
        let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
        while let Some(ev) = stream.next().await {
            let obj = match ev {
                Ok(watcher::Event::Apply(o)) => o,
                Ok(watcher::Event::InitDone) => {
                    ready.fetch_add(1, Ordering::SeqCst);
                    continue;
                }
                _ => continue,
            };
            let w = Write {
                kind,
                name: obj.meta().name.clone().unwrap_or_default(),
                rv: obj
                    .meta()
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(u64::MAX),
                revision: obj
                    .meta()
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(keys::CONTROLLER_REVISION_HASH_LABEL))
                    .cloned()
                    .unwrap_or_default(),
            };
            if let Ok(mut v) = seen.lock() {
                v.push(w);
            }
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Pull-secret copies in kruise-daemon-config
// ---------------------------------------------------------------------------------------------

/// A docker-registry Secret whose only credential is for a host no test pulls from, so it never
/// changes how an image is pulled; `user` tells its versions apart.
fn pull_secret(name: &str, user: &str) -> k8s_openapi::api::core::v1::Secret {
    let auth =
        json!({"auths": {"registry.kruise-e2e.invalid": {"username": user, "password": "x"}}});
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": auth.to_string()}
    }))
    .expect("secret json")
}

fn secret_user(s: &k8s_openapi::api::core::v1::Secret) -> Option<String> {
    let raw = s.data.as_ref()?.get(".dockerconfigjson")?;
    let v: Value = serde_json::from_slice(&raw.0).ok()?;
    v["auths"]["registry.kruise-e2e.invalid"]["username"]
        .as_str()
        .map(str::to_string)
}

fn daemon_config_secrets(client: &Client) -> Api<k8s_openapi::api::core::v1::Secret> {
    Api::namespaced(client.clone(), keys::KRUISE_DAEMON_CONFIG_NAMESPACE)
}

/// Copies of `ns/name` in kruise-daemon-config.
async fn copies_of(
    client: &Client,
    ns: &str,
    name: &str,
) -> Vec<k8s_openapi::api::core::v1::Secret> {
    let source = format!("{ns}/{name}");
    daemon_config_secrets(client)
        .list(&ListParams::default())
        .await
        .expect("list kruise-daemon-config")
        .items
        .into_iter()
        .filter(|s| {
            s.annotations()
                .get(keys::IMAGEPULLJOB_SECRET_SOURCE_KEY_ANNOTATION)
                == Some(&source)
        })
        .collect()
}

/// Issue 12 item 8: while a job runs, editing its pull Secret updates the copy the daemon reads
/// in kruise-daemon-config within seconds (nothing used to look at the source again).
#[tokio::test]
async fn pull_secret_copy_follows_its_source() {
    let _pulls = PULLS.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ipj-secret")
        .await
        .expect("ns");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = ns.api();
    secrets
        .create(&PostParams::default(), &pull_secret("regcred", "v1"))
        .await
        .expect("create secret");
    let api = jobs(&client, &ns.name);
    // A `Never` job stays running with its copy claimed. It names no existing node, so nothing
    // else wakes it: a NodeImage change reconciles the running jobs that may target that node,
    // and that reconcile would copy the source as a side effect (other tests write the real
    // node's NodeImage all the time).
    api.create(
        &PostParams::default(),
        &pull_job(
            "follow",
            &image("testapp", "v1"),
            "e2e-no-such-node",
            json!({"pullSecrets": ["regcred"], "completionPolicy": {"type": "Never"}}),
        ),
    )
    .await
    .expect("create job");
    let job_ref = format!("{}/follow", ns.name);
    let copy = wait_for("the copy of regcred", PULL, || async {
        Ok(copies_of(&client, &ns.name, "regcred")
            .await
            .into_iter()
            .find(|c| {
                c.annotations()
                    .get(keys::IMAGEPULLJOB_SECRET_REFERENCES_ANNOTATION)
                    .is_some_and(|r| r.split(',').any(|j| j == job_ref))
            }))
    })
    .await
    .expect("copy");
    assert_eq!(
        secret_user(&copy).as_deref(),
        Some("v1"),
        "copy has the source's data"
    );
    let running = wait_for("the job's first status", PULL, || async {
        let j = api.get("follow").await?;
        Ok((!j.data["status"]["startTime"].is_null()).then(|| j.data["status"].clone()))
    })
    .await
    .expect("job status");
    assert!(
        running["completionTime"].is_null(),
        "still running: {running}"
    );
    // Let the reconciles that follow its own status write settle.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let mut edited = secrets.get("regcred").await.expect("source");
    edited.data = None;
    edited.string_data = pull_secret("regcred", "v2").string_data;
    secrets
        .replace("regcred", &PostParams::default(), &edited)
        .await
        .expect("edit source");
    let edited_at = std::time::Instant::now();
    let cfg = daemon_config_secrets(&client);
    let copy_name = copy.name_any();
    let updated = wait_for(
        "the copy to carry the edited data",
        Duration::from_secs(15),
        || async {
            let c = cfg.get(&copy_name).await?;
            Ok((secret_user(&c).as_deref() == Some("v2")).then_some(()))
        },
    )
    .await;
    let took = edited_at.elapsed();
    println!("copy followed its source after {took:?}");
    updated.expect("copy updated");
    assert!(
        took < Duration::from_secs(8),
        "the copy took {took:?} to follow its source"
    );

    api.delete("follow", &DeleteParams::default())
        .await
        .expect("delete job");
    wait_for("the copy released", PULL, || async {
        Ok(cfg.get_opt(&copy_name).await?.is_none().then_some(()))
    })
    .await
    .expect("copy deleted with its only job");
    ns.delete().await.expect("delete ns");
}

/// One version of an object seen by [`History`], at its etcd revision.
#[derive(Clone, Debug)]
struct Seen {
    rv: u64,
    deleted: bool,
    obj: Value,
}

/// Every version of the objects one watch delivers, to order writes of different objects by
/// their resourceVersion (etcd's revision orders all writes of the cluster).
struct History {
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl History {
    async fn start<K>(api: Api<K>, cfg: watcher::Config) -> Self
    where
        K: kube::Resource
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug
            + Send
            + 'static,
    {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let ready = Arc::new(AtomicUsize::new(0));
        let (s, r) = (seen.clone(), ready.clone());
        let task = tokio::spawn(async move {
            let mut stream = watcher::watcher(api, cfg).boxed();
            while let Some(ev) = stream.next().await {
                let (obj, deleted) = match ev {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => (o, false),
                    Ok(watcher::Event::Delete(o)) => (o, true),
                    Ok(watcher::Event::InitDone) => {
                        r.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                    _ => continue,
                };
                let rv = obj
                    .meta()
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let obj = serde_json::to_value(&obj).unwrap_or(Value::Null);
                if let Ok(mut v) = s.lock() {
                    v.push(Seen { rv, deleted, obj });
                }
            }
        });
        wait_for("watch started", Duration::from_secs(30), || async {
            Ok((ready.load(Ordering::SeqCst) > 0).then_some(()))
        })
        .await
        .expect("watch");
        Self { seen, task }
    }

    fn all(&self) -> Vec<Seen> {
        let mut v = self.seen.lock().map(|v| v.clone()).unwrap_or_default();
        v.sort_by_key(|s| s.rv);
        v
    }
}

impl Drop for History {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The job's tag in a NodeImage: its spec version, and the status version and phase if any.
type JobTag = (i64, Option<(i64, String)>);

fn job_tag(ni: &Value, full: &str, uid: &str) -> Option<JobTag> {
    let (name, tag) = split(full);
    let spec = ni["spec"]["images"][name]["tags"]
        .as_array()?
        .iter()
        .find(|t| {
            t["tag"] == tag
                && t["ownerReferences"]
                    .as_array()
                    .is_some_and(|o| o.iter().any(|r| r["uid"] == uid))
        })?;
    let status = ni["status"]["imageStatuses"][name]["tags"]
        .as_array()
        .and_then(|tags| tags.iter().find(|t| t["tag"] == tag))
        .map(|t| {
            (
                t["version"].as_i64().unwrap_or(0),
                t["phase"].as_str().unwrap_or("").to_string(),
            )
        });
    Some((spec["version"].as_i64().unwrap_or(0), status))
}

/// Issue 12 item 8: a job for an image already on the node (pulled by an earlier job whose
/// Succeeded status is still in the NodeImage) counts the node done only once the daemon
/// reports the tag at this job's version, as upstream's calculateStatus does; its pull-secret
/// copy exists from before its tag reaches the NodeImage until the job has completed.
#[tokio::test]
async fn job_for_present_image_waits_for_its_version_and_keeps_its_copy() {
    let _pulls = PULLS.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ipj-present")
        .await
        .expect("ns");
    let node = node_name(&client).await;
    let cri = cri::connect().await.expect("CRI");
    let full = push_unique_image(&unique_tag("ipj-present"), 4096).expect("push");
    let api = jobs(&client, &ns.name);
    api.create(
        &PostParams::default(),
        &pull_job("first", &full, &node, json!({})),
    )
    .await
    .expect("create first job");
    wait_job_done(&api, "first").await;
    assert!(
        cri::image_id(&cri, &full).await.expect("CRI").is_some(),
        "the image is on the node"
    );
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = ns.api();
    secrets
        .create(&PostParams::default(), &pull_secret("regcred", "v1"))
        .await
        .expect("create secret");

    let nis = History::start(
        node_images(&client),
        watcher::Config::default().fields(&format!("metadata.name={node}")),
    )
    .await;
    let job_history = History::start(api.clone(), watcher::Config::default()).await;
    let copy_history =
        History::start(daemon_config_secrets(&client), watcher::Config::default()).await;
    let created_at = std::time::Instant::now();
    let job = api
        .create(
            &PostParams::default(),
            &pull_job("second", &full, &node, json!({"pullSecrets": ["regcred"]})),
        )
        .await
        .expect("create second job");
    let uid = job.uid().expect("uid");
    let st = wait_job_done(&api, "second").await;
    println!(
        "job for a present image completed after {:?}",
        created_at.elapsed()
    );
    assert_eq!(
        (&st["desired"], &st["succeeded"], &st["failed"]),
        (&json!(1), &json!(1), &json!(0)),
        "{st}"
    );
    // Let the copy's release reach the watch.
    let source = format!("{}/regcred", ns.name);
    let is_copy = |s: &Seen| {
        s.obj["metadata"]["annotations"][keys::IMAGEPULLJOB_SECRET_SOURCE_KEY_ANNOTATION]
            == source.as_str()
    };
    wait_for("the copy released", PULL, || async {
        Ok(copy_history
            .all()
            .iter()
            .any(|s| is_copy(s) && s.deleted)
            .then_some(()))
    })
    .await
    .expect("copy deleted after the job completed");

    let completed_rv = job_history
        .all()
        .iter()
        .find(|s| {
            s.obj["metadata"]["name"] == "second" && !s.obj["status"]["completionTime"].is_null()
        })
        .map(|s| s.rv)
        .expect("a job version with completionTime");
    let ni_versions = nis.all();
    let tags: Vec<(u64, JobTag)> = ni_versions
        .iter()
        .filter_map(|s| job_tag(&s.obj, &full, &uid).map(|t| (s.rv, t)))
        .collect();
    let (tag_rv, (spec_version, first_status)) = tags
        .first()
        .cloned()
        .expect("the job's tag in the NodeImage");
    // The premise: when the job's tag was written, the NodeImage already said Succeeded for
    // this tag, at the earlier job's (older) version.
    assert!(
        first_status
            .as_ref()
            .is_some_and(|(v, p)| *v < spec_version && p == "Succeeded"),
        "the tag got a new version over an older Succeeded status: {tags:?}"
    );
    let reported_rv = tags
        .iter()
        .find(|(_, (v, st))| {
            st.as_ref()
                .is_some_and(|(sv, p)| sv == v && p == "Succeeded")
        })
        .map(|(rv, _)| *rv)
        .expect("the daemon reported the tag at the job's version");
    assert!(
        reported_rv < completed_rv,
        "the job completed (rv {completed_rv}) before the daemon reported its version (rv {reported_rv}): {tags:?}"
    );
    let copies: Vec<Seen> = copy_history.all().into_iter().filter(is_copy).collect();
    let copy_created = copies
        .iter()
        .find(|s| !s.deleted)
        .map(|s| s.rv)
        .expect("a copy was made");
    let copy_deleted = copies
        .iter()
        .find(|s| s.deleted)
        .map(|s| s.rv)
        .expect("the copy was released");
    assert!(
        copy_created < tag_rv && completed_rv < copy_deleted,
        "the copy existed from rv {copy_created} to {copy_deleted}; the tag was written at rv {tag_rv}, the job completed at rv {completed_rv}"
    );
    ns.delete().await.expect("delete ns");
}

/// Upstream's `pull image with secret and ttl cleaned` and `pull image with secret and
/// completed` (`test/e2e/apps/v1alpha1` and `v1beta1` `pullimages.go`), for an image already on
/// the node so the job can complete at once: checked once a second from the job's creation,
/// within 10 s exactly one copy of the Secret exists in kruise-daemon-config, listing the job in
/// its references, with the source's data; the job completes with its node succeeded; with a
/// TTL the job is deleted, and either way the copy is gone within 10 s of the job being done.
#[tokio::test]
async fn pull_secret_copy_as_upstreams_e2e_checks_it_in_both_versions() {
    let _pulls = PULLS.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ipj-upsecret")
        .await
        .expect("ns");
    let node = node_name(&client).await;
    let present = image("testapp", "v1");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = ns.api();
    for (version, ttl) in [
        (keys::VERSION_V1BETA1, Some(2)),
        (keys::VERSION_V1BETA1, None),
        (keys::VERSION_V1ALPHA1, Some(2)),
        (keys::VERSION_V1ALPHA1, None),
    ] {
        let case = format!(
            "{version}-{}",
            ttl.map_or("kept".to_owned(), |t| format!("ttl{t}"))
        );
        let secret_name = format!("pull-secret-{case}");
        let source = secrets
            .create(&PostParams::default(), &pull_secret(&secret_name, &case))
            .await
            .expect("create secret");
        let api: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            &ns.name,
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(keys::APPS_GROUP, version, "ImagePullJob"),
                "imagepulljobs",
            ),
        );
        let mut completion = json!({"type": "Always", "activeDeadlineSeconds": 50});
        if let Some(ttl) = ttl {
            completion["ttlSecondsAfterFinished"] = json!(ttl);
        }
        let mut job = pull_job(
            &format!("job-{case}"),
            &present,
            &node,
            json!({"pullSecrets": [secret_name],
                   "pullPolicy": {"timeoutSeconds": 50, "backoffLimit": 2},
                   "completionPolicy": completion}),
        );
        job.types = Some(kube::core::TypeMeta {
            api_version: format!("{}/{version}", keys::APPS_GROUP),
            kind: "ImagePullJob".into(),
        });
        let job_name = job.name_any();
        api.create(&PostParams::default(), &job)
            .await
            .expect("create job");
        let job_ref = format!("{}/{job_name}", ns.name);
        let mut synced = false;
        for _ in 0..10 {
            let copies = copies_of(&client, &ns.name, &secret_name).await;
            if let [copy] = copies.as_slice() {
                let refs = copy
                    .annotations()
                    .get(keys::IMAGEPULLJOB_SECRET_REFERENCES_ANNOTATION)
                    .cloned()
                    .unwrap_or_default();
                if refs.split(',').any(|r| r == job_ref) && secret_user(copy) == Some(case.clone())
                {
                    synced = true;
                    break;
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        assert!(
            synced,
            "{case}: one copy of {secret_name}, referencing {job_ref}, with the source's data, within 10 s"
        );
        let st = wait_job_done(&api, &job_name).await;
        assert_eq!(st["succeeded"], json!(1), "{case}: {st}");
        if ttl.is_some() {
            wait_for(
                &format!("{case}: the job deleted by its TTL"),
                PULL,
                || async { Ok(api.get_opt(&job_name).await?.is_none().then_some(())) },
            )
            .await
            .expect("TTL");
        }
        wait_for(
            &format!("{case}: the copy released"),
            Duration::from_secs(10),
            || async {
                Ok(copies_of(&client, &ns.name, &secret_name)
                    .await
                    .is_empty()
                    .then_some(()))
            },
        )
        .await
        .expect("copy released");
        assert!(source.uid().is_some(), "the source Secret is untouched");
        assert!(
            secrets.get_opt(&secret_name).await.expect("get").is_some(),
            "{case}: the source Secret stays"
        );
    }
    ns.delete().await.expect("delete ns");
}
