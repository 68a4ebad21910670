//! runtime-containers-meta: kruise-daemon's view of a Pod's containers (written on the Pod) must
//! be CRI's, and an in-place update that keeps the image ID (v1 → v1-retag) must still complete,
//! which the manager can only judge from that metadata.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_daemon::criruntime::CriClient;
use kruise_e2e::cloneset::{self, set_image, status_str, wait_rolled_out, wait_status};
use kruise_e2e::{TestNamespace, client, container_status, cri, image, wait_for};
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const ROLLOUT: Duration = Duration::from_secs(180);

/// name → (containerID, restartCount) from the Pod's runtime-containers-meta annotation.
fn meta(p: &Pod) -> BTreeMap<String, (String, i64)> {
    let v: Value = p
        .annotations()
        .get(keys::RUNTIME_CONTAINERS_META_ANNOTATION)
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or(Value::Null);
    v["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or("").to_string(),
                        (
                            c["containerID"].as_str().unwrap_or("").to_string(),
                            c["restartCount"].as_i64().unwrap_or(-1),
                        ),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The same view from CRI: the newest container of each name in the Pod.
async fn cri_view(cri: &CriClient, p: &Pod, names: &[&str]) -> BTreeMap<String, (String, i64)> {
    let uid = p.uid().unwrap_or_default();
    let mut out = BTreeMap::new();
    for n in names {
        if let Some(c) = cri::container(cri, &uid, n).await.expect("CRI") {
            out.insert(
                n.to_string(),
                (cri::full_id(cri, &c), i64::from(c.restart_count)),
            );
        }
    }
    out
}

/// Waits until every Pod's annotation equals CRI's view, and the kubelet's too; returns the views.
async fn wait_meta_matches_cri(
    cri: &CriClient,
    pods: &Api<Pod>,
    names: &[&str],
) -> BTreeMap<String, BTreeMap<String, (String, i64)>> {
    // Shared with the polling closure, read back only for the timeout message.
    let last = RefCell::new(String::new());
    let r = wait_for("runtime-containers-meta = CRI", ROLLOUT, || async {
        let mut all = BTreeMap::new();
        for p in cloneset::pods(pods, "web").await? {
            let (m, c) = (meta(&p), cri_view(cri, &p, names).await);
            let kubelet: BTreeMap<String, (String, i64)> = names
                .iter()
                .filter_map(|n| {
                    let s = container_status(&p, n)?;
                    Some((
                        n.to_string(),
                        (
                            s.container_id.clone().unwrap_or_default(),
                            i64::from(s.restart_count),
                        ),
                    ))
                })
                .collect();
            if m.len() != names.len() || m != c || m != kubelet {
                *last.borrow_mut() = format!(
                    "{}: meta {m:?}, CRI {c:?}, kubelet {kubelet:?}",
                    p.name_any()
                );
                return Ok(None);
            }
            all.insert(p.name_any(), m);
        }
        Ok(Some(all))
    })
    .await;
    match r {
        Ok(v) => v,
        Err(e) => panic!("{e}; last mismatch: {}", last.borrow()),
    }
}

/// e: the metadata matches CRI; an in-place update to a tag with the same image ID restarts the
/// app container once per Pod and the CloneSet ends updated and ready.
#[tokio::test]
async fn meta_matches_cri_and_same_image_id_update_completes() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-rtmeta")
        .await
        .expect("ns");
    let cri = cri::connect().await.expect("CRI");
    let api = cloneset::api(&client, &ns.name);
    let mut cs = cloneset::new(
        "web",
        2,
        "v1",
        json!({"type": "RollingUpdate", "rollingUpdate": {
            "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "100%"}}),
    )
    .expect("cs");
    if let Some(c) = cs.data["spec"]["template"]["spec"]["containers"].as_array_mut() {
        c.push(json!({"name": "sidecar", "image": image("sidecar", "v1")}));
    }
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create CloneSet");
    let first = wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("rollout");
    let pods: Api<Pod> = ns.api();
    let names = ["app", "sidecar"];
    let before = wait_meta_matches_cri(&cri, &pods, &names).await;
    let uids: BTreeMap<String, Option<String>> = cloneset::pods(&pods, "web")
        .await
        .expect("pods")
        .iter()
        .map(|p| (p.name_any(), p.uid()))
        .collect();

    set_image(&api, "web", "v1-retag").await.expect("set image");
    wait_status(&api, "web", "a new update revision", ROLLOUT, |cs| {
        status_str(cs, "updateRevision") != status_str(&first, "updateRevision")
    })
    .await
    .expect("new revision");
    wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("in-place update to v1-retag completes");
    let after = wait_meta_matches_cri(&cri, &pods, &names).await;
    // Both tags are on the node now: one image ID, so only the metadata tells a new container.
    let v1 = cri::image_id(&cri, &image("testapp", "v1"))
        .await
        .expect("CRI");
    assert!(v1.is_some());
    assert_eq!(
        v1,
        cri::image_id(&cri, &image("testapp", "v1-retag"))
            .await
            .expect("CRI"),
        "v1 and v1-retag share an image ID"
    );
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "same Pods"
    );
    for p in cloneset::pods(&pods, "web").await.expect("pods") {
        let name = p.name_any();
        assert_eq!(uids.get(&name), Some(&p.uid()), "{name} kept its UID");
        let (b, a) = (&before[&name], &after[&name]);
        assert_ne!(a["app"].0, b["app"].0, "{name}: app recreated");
        assert_eq!(a["app"].1, b["app"].1 + 1, "{name}: app restarted once");
        assert_eq!(a["sidecar"], b["sidecar"], "{name}: sidecar untouched");
        // The spec asks for v1-retag; the kubelet's status may name either tag of the shared
        // image ID (containerd reports the image's first tag), so it is not checked.
        let spec_image = p
            .spec
            .as_ref()
            .and_then(|s| s.containers.iter().find(|c| c.name == "app"))
            .and_then(|c| c.image.clone());
        assert_eq!(spec_image, Some(image("testapp", "v1-retag")));
    }
    ns.delete().await.expect("delete ns");
}
