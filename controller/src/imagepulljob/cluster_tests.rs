//! Checks against a real cluster with a running kruise-daemon (ignored by default):
//! `KUBECONFIG=… cargo test -p kruise-manager --lib -- --ignored imagepulljob::cluster_tests`.
//! Everything lives in a namespace of its own, deleted at the end; only that job is reconciled.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kruise_api::apps::v1beta1::{
    ImagePullJob, ImagePullJobNodeSelector, ImagePullJobSpec, ImagePullJobTemplate, NodeImage,
};
use kube::api::{DeleteParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::podcache::PodCache;

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

#[tokio::test]
#[ignore = "needs a cluster with kruise-daemon"]
async fn pull_job_runs_to_completion_and_cleans_up() {
    let client = Client::try_default().await.expect("client");
    let node = env("KRS_NODE", "kruise-node");
    let image = env("KRS_PULL_IMAGE", "127.0.0.1:5000/kruise-rs/sidecar:v2");
    let ns = format!("krs-ipj-{:06x}", rand::random::<u32>() & 0xff_ffff);
    let nss: Api<Namespace> = Api::all(client.clone());
    let mut n = Namespace::default();
    n.metadata.name = Some(ns.clone());
    nss.create(&PostParams::default(), &n)
        .await
        .expect("namespace");

    // What the NodeImage controller does for a Ready node, in case it is not running.
    let nis: Api<NodeImage> = Api::all(client.clone());
    if nis.get_opt(&node).await.expect("get nodeimage").is_none() {
        let labels = Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
            .get(&node)
            .await
            .expect("node")
            .metadata
            .labels;
        let mut ni = NodeImage::new(&node, Default::default());
        ni.metadata.labels = labels;
        nis.create(&PostParams::default(), &ni)
            .await
            .expect("create nodeimage");
    }

    let token = CancellationToken::new();
    let (store, writer) = reflector::store::<NodeImage>();
    let stream = watcher(
        Api::<NodeImage>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(writer);
    let t = token.clone();
    tokio::spawn(async move {
        let mut s = std::pin::pin!(stream.take_until(t.cancelled_owned()));
        while s.next().await.is_some() {}
    });
    store.wait_until_ready().await.expect("nodeimage cache");
    let pods = PodCache::start(client.clone(), Some(&ns), token.clone());
    pods.wait_synced().await;
    let ctx = Ctx {
        client: client.clone(),
        pods,
        node_images: store,
        metrics: Arc::new(crate::metrics::Metrics::new()),
        rv_exp: ResourceVersionExpectations::new(),
        extra_ttl_for_always: 0,
    };

    let jobs: Api<ImagePullJob> = Api::namespaced(client.clone(), &ns);
    let mut job = ImagePullJob::new(
        "pull",
        ImagePullJobSpec {
            image: image.clone(),
            template: ImagePullJobTemplate {
                selector: Some(ImagePullJobNodeSelector {
                    names: vec![node.clone()],
                    ..Default::default()
                }),
                ..Default::default()
            },
        },
    );
    job.spec
        .template
        .completion_policy
        .ttl_seconds_after_finished = Some(5);
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("create job");

    let mut finished = None;
    for _ in 0..120 {
        let j = jobs.get("pull").await.expect("get job");
        if let Some(st) = j.status.as_ref().filter(|s| s.completion_time.is_some()) {
            finished = Some(st.clone());
            break;
        }
        let _ = reconcile_inner(&j, &ctx).await.expect("reconcile");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let st = finished.expect("job finished within 2 minutes");
    eprintln!(
        "final status: {}",
        serde_json::to_string(&st).unwrap_or_default()
    );
    assert_eq!(
        (st.desired, st.succeeded, st.failed, st.active),
        (1, 1, 0, 0)
    );
    let (name, tag) = image::name_and_tag(&image).expect("image");
    let ni = Api::<NodeImage>::all(client.clone())
        .get(&node)
        .await
        .expect("nodeimage");
    let uid = jobs.get("pull").await.ok().and_then(|j| j.uid());
    let t = ni.spec.images[&name]
        .tags
        .iter()
        .find(|t| t.tag == tag)
        .expect("tag written");
    assert!(t.owner_references.iter().any(|r| r.uid == uid));

    // Finished: finalizer released, then deleted after its TTL.
    let mut gone = false;
    for _ in 0..30 {
        match jobs.get_opt("pull").await.expect("get") {
            None => {
                gone = true;
                break;
            }
            Some(j) => {
                let _ = reconcile_inner(&j, &ctx).await.expect("reconcile");
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(gone, "job deleted after ttlSecondsAfterFinished");
    token.cancel();
    let _ = nss.delete(&ns, &DeleteParams::default()).await;
}

#[tokio::test]
#[ignore = "needs a cluster with kruise-daemon"]
async fn image_list_pull_job_fans_out_and_aggregates() {
    use kruise_api::apps::v1beta1::{ImageListPullJob, ImageListPullJobSpec};

    let client = Client::try_default().await.expect("client");
    let node = env("KRS_NODE", "kruise-node");
    let ns = format!("krs-ilpj-{:06x}", rand::random::<u32>() & 0xff_ffff);
    let nss: Api<Namespace> = Api::all(client.clone());
    let mut n = Namespace::default();
    n.metadata.name = Some(ns.clone());
    nss.create(&PostParams::default(), &n)
        .await
        .expect("namespace");
    let token = CancellationToken::new();

    let (store, writer) = reflector::store::<NodeImage>();
    let s1 = watcher(
        Api::<NodeImage>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(writer);
    let (jobs_store, jobs_writer) = reflector::store::<ImagePullJob>();
    let s2 = watcher(
        Api::<ImagePullJob>::namespaced(client.clone(), &ns),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(jobs_writer);
    let t = token.clone();
    tokio::spawn(async move {
        let mut s = std::pin::pin!(s1.take_until(t.cancelled_owned()));
        while s.next().await.is_some() {}
    });
    let t = token.clone();
    tokio::spawn(async move {
        let mut s = std::pin::pin!(s2.take_until(t.cancelled_owned()));
        while s.next().await.is_some() {}
    });
    store.wait_until_ready().await.expect("nodeimage cache");
    jobs_store.wait_until_ready().await.expect("job cache");
    let pods = PodCache::start(client.clone(), Some(&ns), token.clone());
    pods.wait_synced().await;
    let metrics = Arc::new(crate::metrics::Metrics::new());
    let ctx = Ctx {
        client: client.clone(),
        pods,
        node_images: store,
        metrics: metrics.clone(),
        rv_exp: ResourceVersionExpectations::new(),
        extra_ttl_for_always: 0,
    };
    let lctx = list::test_ctx(client.clone(), jobs_store, metrics);

    let lists: Api<ImageListPullJob> = Api::namespaced(client.clone(), &ns);
    let list = ImageListPullJob::new(
        "images",
        ImageListPullJobSpec {
            images: vec![
                "127.0.0.1:5000/kruise-rs/testapp:v2".into(),
                "127.0.0.1:5000/kruise-rs/sidecar:v1".into(),
            ],
            template: ImagePullJobTemplate {
                selector: Some(ImagePullJobNodeSelector {
                    names: vec![node],
                    ..Default::default()
                }),
                ..Default::default()
            },
        },
    );
    lists
        .create(&PostParams::default(), &list)
        .await
        .expect("list");
    let jobs: Api<ImagePullJob> = Api::namespaced(client.clone(), &ns);
    let mut done = None;
    for _ in 0..90 {
        let l = lists.get("images").await.expect("get list");
        if let Some(st) = l.status.as_ref().filter(|s| s.completion_time.is_some()) {
            done = Some(st.clone());
            break;
        }
        let _ = list::reconcile_for_test(&l, &lctx)
            .await
            .expect("list reconcile");
        for j in jobs.list(&Default::default()).await.expect("jobs").items {
            let _ = reconcile_inner(&j, &ctx).await.expect("job reconcile");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let st = done.expect("list finished within 90s");
    eprintln!(
        "final list status: {}",
        serde_json::to_string(&st).unwrap_or_default()
    );
    assert_eq!((st.desired, st.completed, st.succeeded), (2, 2, 2));
    let owned = jobs.list(&Default::default()).await.expect("jobs").items;
    assert_eq!(owned.len(), 2);
    assert!(owned.iter().all(|j| j.name_any().starts_with("images-")));
    // Release the jobs' finalizers before the namespace goes.
    for j in owned {
        let _ = reconcile_inner(&j, &ctx).await;
    }
    token.cancel();
    let _ = nss.delete(&ns, &DeleteParams::default()).await;
}

/// A CloneSet paused between two revisions: pre-download creates one job for the changed image,
/// labels the revision, does nothing the second time, and the job pulls on the pods' node.
#[tokio::test]
#[ignore = "needs a cluster with kruise-manager (CloneSet controller) and kruise-daemon"]
async fn cloneset_predownload_creates_job_once() {
    use k8s_openapi::api::apps::v1::ControllerRevision;
    use kruise_api::apps::v1beta1::CloneSet;
    use kube::api::{Patch, PatchParams};

    let client = Client::try_default().await.expect("client");
    let registry = env("KRS_REGISTRY", "127.0.0.1:5000");
    let ns = format!("krs-pre-{:06x}", rand::random::<u32>() & 0xff_ffff);
    let nss: Api<Namespace> = Api::all(client.clone());
    let mut n = Namespace::default();
    n.metadata.name = Some(ns.clone());
    nss.create(&PostParams::default(), &n)
        .await
        .expect("namespace");
    let token = CancellationToken::new();
    let (store, writer) = reflector::store::<NodeImage>();
    let s1 = watcher(
        Api::<NodeImage>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(writer);
    let t = token.clone();
    tokio::spawn(async move {
        let mut s = std::pin::pin!(s1.take_until(t.cancelled_owned()));
        while s.next().await.is_some() {}
    });
    store.wait_until_ready().await.expect("nodeimage cache");
    let pods = PodCache::start(client.clone(), Some(&ns), token.clone());
    pods.wait_synced().await;
    let ctx = Ctx {
        client: client.clone(),
        pods,
        node_images: store,
        metrics: Arc::new(crate::metrics::Metrics::new()),
        rv_exp: ResourceVersionExpectations::new(),
        extra_ttl_for_always: 0,
    };

    let css: Api<CloneSet> = Api::namespaced(client.clone(), &ns);
    let cs: CloneSet = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [
                    {"name": "app", "image": format!("{registry}/kruise-rs/testapp:v1")}
                ]}
            },
            "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}}
        }
    }))
    .expect("cloneset json");
    css.create(&PostParams::default(), &cs)
        .await
        .expect("create cloneset");
    for _ in 0..90 {
        let c = css.get("web").await.expect("get");
        if c.status.as_ref().is_some_and(|s| s.ready_replicas == 4) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // Pause first, then change the image: the new revision exists, no pod moves to it.
    let patch =
        serde_json::json!({"spec": {"updateStrategy": {"rollingUpdate": {"paused": true}}}});
    css.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("pause");
    let patch = serde_json::json!({"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": format!("{registry}/kruise-rs/testapp:v3")}
    ]}}}});
    css.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("new image");
    let mut revs = None;
    for _ in 0..30 {
        let c = css.get("web").await.expect("get");
        if let Some(s) = c
            .status
            .as_ref()
            .filter(|s| !s.update_revision.is_empty() && s.update_revision != s.current_revision)
        {
            revs = Some((
                c.clone(),
                s.current_revision.clone(),
                s.update_revision.clone(),
            ));
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (cs, cur_name, upd_name) = revs.expect("two revisions");
    let crs: Api<ControllerRevision> = Api::namespaced(client.clone(), &ns);
    let cur = crs.get(&cur_name).await.expect("current revision");
    let upd = crs.get(&upd_name).await.expect("update revision");

    let out = predownload::ensure_predownload_jobs(&client, &cs, &cur, &upd, true)
        .await
        .expect("predownload");
    assert_eq!(out.created, vec![format!("{upd_name}-app")]);
    let upd = crs.get(&upd_name).await.expect("update revision");
    assert!(
        upd.labels()
            .contains_key(keys::IMAGE_PREDOWNLOAD_CREATED_LABEL)
    );
    let again = predownload::ensure_predownload_jobs(&client, &cs, &cur, &upd, true)
        .await
        .expect("predownload again");
    assert!(again.created.is_empty());

    let jobs: Api<ImagePullJob> = Api::namespaced(client.clone(), &ns);
    let name = format!("{upd_name}-app");
    let mut st = None;
    for _ in 0..90 {
        let j = jobs.get(&name).await.expect("job");
        if let Some(s) = j.status.as_ref().filter(|s| s.completion_time.is_some()) {
            st = Some(s.clone());
            break;
        }
        let _ = reconcile_inner(&j, &ctx).await.expect("reconcile");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let st = st.expect("pre-download job finished");
    eprintln!(
        "pre-download job status: {}",
        serde_json::to_string(&st).unwrap_or_default()
    );
    assert_eq!((st.desired, st.succeeded), (1, 1));
    // Release the finalizer, then clean up.
    let j = jobs.get(&name).await.expect("job");
    let _ = reconcile_inner(&j, &ctx).await;
    token.cancel();
    let _ = nss.delete(&ns, &DeleteParams::default()).await;
}
