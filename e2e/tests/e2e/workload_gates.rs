//! Workload feature gates that change what the CloneSet and Advanced StatefulSet controllers
//! write: `CloneSetShortHash`, `CloneSetPartitionRollback` and `PreDownloadImageForInPlaceUpdate`
//! for Advanced StatefulSet. Each is off by default, so one serial test reconfigures the manager
//! once with all three on and checks each the way a user would: labels, Pod UIDs, restart
//! counts, images and the ImagePullJob's owner.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::features::Gate;
use kruise_api::keys;
use kruise_e2e::manager::{self, ManagerConfig};
use kruise_e2e::{TestNamespace, client, container_status, image, statefulset, wait_for};
use kruise_e2e::{cloneset, cloneset::status_str};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

const ROLL: Duration = Duration::from_secs(180);

/// Name → (uid, restartCount of `app`, image of `app`, revision label).
type Seen = BTreeMap<String, (String, i32, String, String)>;

fn seen(pods: &[Pod]) -> Seen {
    pods.iter()
        .map(|p| {
            let image = p
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            (
                p.name_any(),
                (
                    p.uid().unwrap_or_default(),
                    container_status(p, "app").map_or(-1, |c| c.restart_count),
                    image,
                    cloneset::pod_revision(p).to_string(),
                ),
            )
        })
        .collect()
}

fn short(revision: &str) -> &str {
    revision.rsplit('-').next().unwrap_or(revision)
}

fn jobs(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(keys::APPS_GROUP, keys::VERSION_V1BETA1, "ImagePullJob");
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, "imagepulljobs"),
    )
}

/// The CloneSet's Pods once every one of them is ready and `check` holds for what they show.
async fn cloneset_pods_when(pods: &Api<Pod>, what: &str, check: impl Fn(&Seen) -> bool) -> Seen {
    wait_for(what, ROLL, || async {
        let ps = cloneset::pods(pods, "web").await?;
        let s = seen(&ps);
        Ok((ps.len() == 2 && ps.iter().all(kruise_e2e::pod_ready) && check(&s)).then_some(s))
    })
    .await
    .expect(what)
}

/// The three gates on in the installed manager (so the serial phase): a CloneSet made before
/// keeps its Pods, writes the short hash on update and rolls a Pod back in place when the
/// partition grows; an Advanced StatefulSet's image change creates its pre-download job first.
#[tokio::test]
async fn serial_cloneset_short_hash_partition_rollback_and_statefulset_predownload() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-wl-gates")
        .await
        .expect("ns");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let cs_api = cloneset::api(&client, &ns.name);

    // A CloneSet running before the gates are turned on: its Pods carry the full name.
    let strategy = json!({"type": "RollingUpdate", "rollingUpdate": {
        "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1, "partition": 0}});
    cs_api
        .create(
            &PostParams::default(),
            &cloneset::new("web", 2, "v1", strategy).expect("cs"),
        )
        .await
        .expect("create CloneSet");
    let first = cloneset::wait_rolled_out(&cs_api, "web", 2, ROLL)
        .await
        .expect("initial rollout");
    let v1_revision = status_str(&first, "updateRevision").to_string();
    let before = seen(&cloneset::pods(&pods, "web").await.expect("pods"));
    assert!(
        before.values().all(|(_, _, _, rev)| *rev == v1_revision),
        "full revision names before the gate: {before:?}"
    );

    let gates = [
        Gate::CloneSetShortHash,
        Gate::CloneSetPartitionRollback,
        Gate::PreDownloadImageForInPlaceUpdate,
    ]
    .map(|g| format!("{}=true", g.name()))
    .join(",");
    let gated = manager::reconfigure(&client, &ManagerConfig::default().gates(&gates))
        .await
        .expect("the manager runs with the three gates on");

    // CloneSetShortHash: both label forms are one revision, so the Pods the restarted manager
    // finds are neither updated nor recreated; an update writes the hash alone.
    cloneset::patch_spec(
        &cs_api,
        "web",
        json!({"updateStrategy": {"rollingUpdate": {"partition": 1}}}),
    )
    .await
    .expect("partition 1");
    cloneset::set_image(&cs_api, "web", "v2")
        .await
        .expect("image v2");
    let cs = cloneset::wait_status(&cs_api, "web", "one Pod at v2", ROLL, |cs| {
        cloneset::status_i64(cs, "updatedReadyReplicas") == 1
            && status_str(cs, "updateRevision") != v1_revision
    })
    .await
    .expect("one Pod updated");
    let v2_revision = status_str(&cs, "updateRevision").to_string();
    assert_eq!(status_str(&cs, "currentRevision"), v1_revision);
    assert!(
        v2_revision.starts_with("web-"),
        "status keeps full names: {v2_revision}"
    );
    let v2 = image("testapp", "v2");
    // Waits for the restart too: the image is in the spec before the container runs it.
    let mid = cloneset_pods_when(&pods, "one Pod restarted on v2", |s| {
        let moved: Vec<_> = s.iter().filter(|(_, v)| v.2 == v2).collect();
        moved.len() == 1 && moved.iter().all(|(n, v)| v.1 > before[*n].1)
    })
    .await;
    let uids = |s: &Seen| s.values().map(|v| v.0.clone()).collect::<Vec<_>>();
    assert_eq!(uids(&mid), uids(&before), "no Pod was recreated: {mid:?}");
    for (name, (_, restarts, img, rev)) in &mid {
        if *img == v2 {
            assert_eq!(rev, short(&v2_revision), "{name}: short hash only");
            assert_eq!(*restarts, before[name].1 + 1, "{name}: updated in place");
        } else {
            assert_eq!(*rev, v1_revision, "{name}: left as it was");
            assert_eq!(*restarts, before[name].1, "{name}: not restarted");
        }
    }

    // CloneSetPartitionRollback: a partition of all replicas moves the v2 Pod back to v1, in
    // place (same Pod, one more restart).
    cloneset::patch_spec(
        &cs_api,
        "web",
        json!({"updateStrategy": {"rollingUpdate": {"partition": 2}}}),
    )
    .await
    .expect("partition 2");
    let v1 = image("testapp", "v1");
    let back = cloneset_pods_when(&pods, "every Pod restarted back on v1", |s| {
        s.values().all(|v| v.2 == v1) && s.iter().all(|(n, v)| mid[n].2 != v2 || v.1 > mid[n].1)
    })
    .await;
    assert_eq!(uids(&back), uids(&before), "rolled back in place: {back:?}");
    for (name, (_, restarts, _, rev)) in &back {
        let (_, was, img, _) = &mid[name];
        if *img == v2 {
            assert_eq!(*restarts, was + 1, "{name}: restarted once more to go back");
            assert_eq!(
                rev,
                short(&v1_revision),
                "{name}: current revision, short hash"
            );
        } else {
            assert_eq!(restarts, was, "{name}: untouched");
        }
    }
    let cs = cloneset::wait_status(
        &cs_api,
        "web",
        "no Pod at the update revision",
        ROLL,
        |cs| cloneset::status_i64(cs, "updatedReplicas") == 0,
    )
    .await
    .expect("status after rollback");
    assert_eq!(status_str(&cs, "currentRevision"), v1_revision);

    // PreDownloadImageForInPlaceUpdate on an Advanced StatefulSet: the job for the new image
    // is created while the paused update has not touched a Pod yet.
    statefulset::create_headless_service(&client, &ns.name, "db")
        .await
        .expect("service");
    let sts_api = statefulset::api(&client, &ns.name);
    let spec = json!({"podManagementPolicy": "Parallel", "updateStrategy": {
        "type": "RollingUpdate", "rollingUpdate": {
            "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 2, "paused": true}}});
    sts_api
        .create(
            &PostParams::default(),
            &statefulset::new("db", 4, "v1", false, spec).expect("sts"),
        )
        .await
        .expect("create StatefulSet");
    statefulset::wait_rolled_out(&sts_api, "db", 4, ROLL)
        .await
        .expect("StatefulSet ready");
    let sts_before = seen(&statefulset::pods(&pods, "db").await.expect("pods"));
    cloneset::set_image(&sts_api, "db", "v2")
        .await
        .expect("image v2");
    let st = statefulset::wait_status(&sts_api, "db", "a new update revision", ROLL, |st| {
        st["updateRevision"] != st["currentRevision"]
    })
    .await
    .expect("new revision");
    let update = st.data["status"]["updateRevision"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let job_name = format!("{update}-app");
    let job_api = jobs(&client, &ns.name);
    let job = wait_for(
        &format!("pre-download job {job_name}"),
        Duration::from_secs(60),
        || async { Ok(job_api.get_opt(&job_name).await?) },
    )
    .await
    .expect("pre-download job");
    assert_eq!(job.data["spec"]["image"].as_str(), Some(v2.as_str()));
    assert!(
        job.owner_references()
            .iter()
            .any(|o| o.kind == "StatefulSet"
                && o.name == "db"
                && o.uid == st.uid().unwrap_or_default()
                && o.controller == Some(true)),
        "owned by the StatefulSet: {:?}",
        job.owner_references()
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
    let paused = seen(&statefulset::pods(&pods, "db").await.expect("pods"));
    assert_eq!(paused, sts_before, "no Pod moved before the job existed");

    // Unpaused, the update goes on in place.
    cloneset::patch_spec(
        &sts_api,
        "db",
        json!({"updateStrategy": {"rollingUpdate": {"paused": false}}}),
    )
    .await
    .expect("unpause");
    statefulset::wait_rolled_out(&sts_api, "db", 4, ROLL)
        .await
        .expect("StatefulSet rollout");
    let after = seen(&statefulset::pods(&pods, "db").await.expect("pods"));
    assert_eq!(
        uids(&after),
        uids(&sts_before),
        "updated in place: {after:?}"
    );
    assert!(after.values().all(|(_, _, img, _)| *img == v2), "{after:?}");

    ns.delete().await.expect("delete ns");
    gated
        .restore(&client)
        .await
        .expect("the installed manager is back");
}
