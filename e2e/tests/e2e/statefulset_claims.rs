//! Advanced StatefulSet claim templates (upstream v1.9's volume expansion): templates may
//! change, `status.volumeClaims` counts the claims that match them, and under
//! `StatefulSetAutoResizePVCGate` with `volumeClaimUpdateStrategy.type: OnPodRollingUpdate` each
//! Pod's claims are resized to the template before the Pod is updated, on the local cluster's
//! expandable CSI storage (StorageClass `allow-volume-expansion`, as upstream's specs name it).

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_api::features::Gate;
use kruise_api::keys;
use kruise_e2e::cli::Kruise;
use kruise_e2e::statefulset as asts;
use kruise_e2e::{TestNamespace, client, image, manager};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const ROLLOUT: Duration = Duration::from_secs(240);

fn claims_status(st: &Value) -> Value {
    st["volumeClaims"].clone()
}

fn counted(name: &str, compatible: i64, ready: i64) -> Value {
    json!([{"volumeClaimName": name, "compatibleReplicas": compatible,
        "compatibleReadyReplicas": ready}])
}

/// The storage a claim requests and the capacity it has.
fn sizes(c: &PersistentVolumeClaim) -> (String, String) {
    let req = c
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_default();
    let cap = c
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_default();
    (req, cap)
}

async fn resize_template(api: &Api<kube::api::DynamicObject>, name: &str, size: &str) {
    let ops: json_patch::Patch = serde_json::from_value(json!([{"op": "replace",
        "path": "/spec/volumeClaimTemplates/0/spec/resources/requests/storage", "value": size}]))
    .expect("patch");
    api.patch(name, &PatchParams::default(), &Patch::Json::<()>(ops))
        .await
        .expect("resize the claim template");
}

/// Without the gate (upstream's default): a claim template may change (it reaches claims made
/// later; existing ones keep their size), and `status.volumeClaims` counts, per template, the
/// Pods whose claim requests at least the template's size and whose capacity reached it.
#[tokio::test]
async fn claim_templates_may_change_and_status_counts_matching_claims() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-vct")
        .await
        .expect("ns");
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("svc");
    let api = asts::api(&client, &ns.name);
    let sts = asts::new("web", 2, "v1", true, json!({})).expect("sts");
    api.create(&PostParams::default(), &sts)
        .await
        .expect("create");
    asts::wait_status(&api, "web", "2 ready, 2 claims counted", ROLLOUT, |st| {
        st["readyReplicas"] == 2 && claims_status(st) == counted("data", 2, 2)
    })
    .await
    .expect("claims counted");
    let kk = Kruise::new(&ns.name).expect("kubectl-kruise");
    let described = |line: &'static str| {
        let kk = kk.clone();
        async move {
            let run = kk.run(&["describe", "asts/web"]).await.expect("describe");
            assert!(
                run.code == Some(0) && run.stdout.contains(line),
                "{line:?} in {run}"
            );
        }
    };
    described("Volume claims: data 2 of 2 at the template's size (2 resized)\n").await;
    resize_template(&api, "web", "32Mi").await;
    // The claims keep 16Mi: none is compatible with the 32Mi template any more.
    asts::wait_status(&api, "web", "no claim matches 32Mi", ROLLOUT, |st| {
        claims_status(st) == counted("data", 0, 0)
    })
    .await
    .expect("claims recounted");
    described("Volume claims: data 0 of 2 at the template's size (0 resized)\n").await;
    let claims: Api<PersistentVolumeClaim> = ns.api();
    for i in 0..2 {
        let c = claims.get(&format!("data-web-{i}")).await.expect("claim");
        assert_eq!(sizes(&c).0, "16Mi", "data-web-{i} kept its size");
    }
    ns.delete().await.expect("cleanup");
}

/// With the gate: an unset strategy defaults to OnDelete; with OnPodRollingUpdate a size change
/// refused by its StorageClass (`allowVolumeExpansion: false`) or a change other than the size
/// is refused naming the field; an allowed one resizes each Pod's claim (the CSI resizer grows
/// its capacity) and then recreates the Pod at the new revision.
#[tokio::test]
async fn gated_claims_grow_before_each_pod_updates_with_the_gate() {
    let client = client().await.expect("cluster");
    manager::require_gates(&client, &[Gate::StatefulSetAutoResizePVCGate])
        .await
        .expect("the gated phase's manager");
    let ns = TestNamespace::create(&client, "e2e-asts-resize")
        .await
        .expect("ns");
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("svc");
    let api = asts::api(&client, &ns.name);
    let with_class = |name: &str, replicas: i32, class: &str, strategy: Option<&str>| {
        let mut sts = asts::new(name, replicas, "v1", true, json!({})).expect("sts");
        sts.data["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"] = json!(class);
        if let Some(t) = strategy {
            sts.data["spec"]["volumeClaimUpdateStrategy"] = json!({"type": t});
        }
        sts
    };
    let plain = api
        .create(
            &PostParams::default(),
            &with_class("plain", 0, "allow-volume-expansion", None),
        )
        .await
        .expect("create");
    assert_eq!(
        plain.data["spec"]["volumeClaimUpdateStrategy"],
        json!({"type": "OnDelete"}),
        "defaulted under the gate"
    );

    // Refusals, on a set without Pods.
    api.create(
        &PostParams::default(),
        &with_class(
            "fixed",
            0,
            "disallow-volume-expansion",
            Some("OnPodRollingUpdate"),
        ),
    )
    .await
    .expect("create");
    let ops = |path: &str, value: Value| -> json_patch::Patch {
        serde_json::from_value(json!([{"op": "replace", "path": path, "value": value}]))
            .expect("patch")
    };
    let err = api
        .patch(
            "fixed",
            &PatchParams::default(),
            &Patch::Json::<()>(ops(
                "/spec/volumeClaimTemplates/0/spec/resources/requests/storage",
                json!("32Mi"),
            )),
        )
        .await
        .expect_err("the class refuses expansion");
    assert!(
        err.to_string()
            .contains("spec.volumeClaimTemplates[data].spec.resources.requests.storage")
            && err.to_string().contains("disallow-volume-expansion"),
        "{err}"
    );
    let err = api
        .patch(
            "fixed",
            &PatchParams::default(),
            &Patch::Json::<()>(ops(
                "/spec/volumeClaimTemplates/0/spec/accessModes",
                json!(["ReadWriteMany"]),
            )),
        )
        .await
        .expect_err("only the size may change");
    assert!(
        err.to_string().contains("spec.volumeClaimTemplates[data]"),
        "{err}"
    );

    // The resize, with an image change as upstream's specs make it.
    api.create(
        &PostParams::default(),
        &with_class(
            "web",
            2,
            "allow-volume-expansion",
            Some("OnPodRollingUpdate"),
        ),
    )
    .await
    .expect("create");
    asts::wait_status(&api, "web", "2 ready with ready claims", ROLLOUT, |st| {
        st["readyReplicas"] == 2 && claims_status(st) == counted("data", 2, 2)
    })
    .await
    .expect("initial rollout");
    let pods: Api<Pod> = ns.api();
    let before: Vec<String> = asts::pods(&pods, "web")
        .await
        .expect("pods")
        .iter()
        .filter_map(|p| p.uid())
        .collect();
    let ops2: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/volumeClaimTemplates/0/spec/resources/requests/storage",
         "value": "32Mi"},
        {"op": "replace", "path": "/spec/template/spec/containers/0/image",
         "value": image("testapp", "v2")}]))
    .expect("patch");
    api.patch("web", &PatchParams::default(), &Patch::Json::<()>(ops2))
        .await
        .expect("resize and new image");
    asts::wait_status(
        &api,
        "web",
        "rolled out with resized claims",
        ROLLOUT,
        |st| {
            st["updatedReadyReplicas"] == 2
                && st["currentRevision"] == st["updateRevision"]
                && claims_status(st) == counted("data", 2, 2)
        },
    )
    .await
    .expect("rollout with resize");
    let claims: Api<PersistentVolumeClaim> = ns.api();
    for i in 0..2 {
        let c = claims.get(&format!("data-web-{i}")).await.expect("claim");
        assert_eq!(
            sizes(&c),
            ("32Mi".to_owned(), "32Mi".to_owned()),
            "data-web-{i} resized by the CSI resizer"
        );
        assert_eq!(
            c.annotations()
                .get(keys::PVC_OWNED_BY_ASTS_ANNOTATION)
                .map(String::as_str),
            Some("web"),
            "data-web-{i} marked by the controller that resized it"
        );
    }
    let after = asts::pods(&pods, "web").await.expect("pods");
    assert_eq!(after.len(), 2);
    for p in &after {
        assert!(
            !before.contains(&p.uid().unwrap_or_default()),
            "{} recreated",
            p.name_any()
        );
        let img = p.spec.as_ref().map(|s| s.containers[0].image.clone());
        assert_eq!(img, Some(Some(image("testapp", "v2"))));
    }
    ns.delete().await.expect("cleanup");
}
