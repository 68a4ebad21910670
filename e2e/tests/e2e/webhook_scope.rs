//! Which Pods the Pod webhook sees. With failurePolicy Fail a manager outage refuses every Pod
//! create the webhook covers, so it must skip kube-system, Kruise's own namespace and namespaces
//! labelled `kruise.io/webhook-exempt`, and is called only for the Pods Kruise-rs concerns (the
//! serial test scales the manager to zero). Server-side dry runs show what admission did to a Pod
//! without running it. Runs in dev mode and in cluster.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kruise_api::keys;
use kruise_e2e::manager::MANAGER_DEPLOYMENT;
use kruise_e2e::mode::{KRUISE_NS, MANAGER_POD_SELECTOR, Mode, mode};
use kruise_e2e::sidecarset::{self as sc, Guard};
use kruise_e2e::{TestNamespace, client, image, pod_ready, wait_for};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

/// A Pod with two ordered containers: the webhook gives each a launch barrier env.
fn ordered_pod() -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "scope",
                     "annotations": {keys::CONTAINER_LAUNCH_PRIORITY_ANNOTATION: keys::CONTAINER_LAUNCH_PRIORITY_ORDERED}},
        "spec": {"containers": [
            {"name": "a", "image": image("testapp", "v1")},
            {"name": "b", "image": image("sidecar", "v1")}
        ]}
    }))
    .expect("pod")
}

/// Whether admission injected the launch barrier into a dry-run create in `ns`.
async fn mutated_in(client: &Client, ns: &str) -> bool {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let created = pods
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &ordered_pod(),
        )
        .await
        .expect("dry-run create");
    created
        .spec
        .expect("spec")
        .containers
        .iter()
        .flat_map(|c| c.env.iter().flatten())
        .any(|e| e.name == keys::ENV_CONTAINER_BARRIER)
}

#[tokio::test]
async fn pod_webhook_skips_exempt_and_system_namespaces() {
    let client = client().await.expect("cluster");
    let covered = TestNamespace::create(&client, "e2e-scope")
        .await
        .expect("ns");
    let exempt = TestNamespace::create(&client, "e2e-scope-exempt")
        .await
        .expect("ns");
    assert!(
        mutated_in(&client, &covered.name).await,
        "a namespace without the label is covered by the Pod webhook"
    );

    Api::<Namespace>::all(client.clone())
        .patch(
            &exempt.name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {keys::WEBHOOK_EXEMPT_NAMESPACE_LABEL: "true"}}}),
            ),
        )
        .await
        .expect("label the namespace");
    assert!(
        !mutated_in(&client, &exempt.name).await,
        "a namespace labelled {} is skipped",
        keys::WEBHOOK_EXEMPT_NAMESPACE_LABEL
    );
    assert!(
        !mutated_in(&client, "kube-system").await,
        "kube-system is skipped"
    );
    covered.delete().await.expect("delete ns");
    exempt.delete().await.expect("delete ns");
}

/// The manager Deployment's replicas, set back when dropped (a failing test unwinds through it).
struct ManagerScaled {
    replicas: i32,
    restored: bool,
}

impl ManagerScaled {
    async fn to_zero(client: &Client) -> Self {
        let deploys: Api<Deployment> = Api::namespaced(client.clone(), KRUISE_NS);
        let replicas = deploys
            .get(MANAGER_DEPLOYMENT)
            .await
            .expect("manager Deployment")
            .spec
            .and_then(|s| s.replicas)
            .unwrap_or(1);
        scale_manager(client, 0).await;
        Self {
            replicas,
            restored: false,
        }
    }

    async fn restore(mut self, client: &Client) {
        self.restored = true;
        scale_manager(client, self.replicas).await;
    }
}

impl Drop for ManagerScaled {
    fn drop(&mut self) {
        if self.restored {
            return;
        }
        let replicas = self.replicas;
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                let client = client().await.expect("cluster");
                scale_manager(&client, replicas).await;
            });
        })
        .join();
    }
}

/// Scales the manager and waits until exactly `replicas` manager Pods run, Ready (none at all
/// for 0, so nothing serves the webhook).
async fn scale_manager(client: &Client, replicas: i32) {
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), KRUISE_NS);
    deploys
        .patch(
            MANAGER_DEPLOYMENT,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .expect("scale the manager");
    let pods: Api<Pod> = Api::namespaced(client.clone(), KRUISE_NS);
    wait_for("the manager Pods", Duration::from_secs(180), || async {
        let live = pods
            .list(&ListParams::default().labels(MANAGER_POD_SELECTOR))
            .await?
            .items;
        let want = usize::try_from(replicas).unwrap_or(0);
        Ok((live.len() == want && live.iter().all(pod_ready)).then_some(()))
    })
    .await
    .expect("manager scaled");
}

/// Waits until `mpod.kb.io`'s condition names `ns` (the SidecarSet's namespace).
async fn wait_scoped_to(client: &Client, ns: &str) {
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    wait_for("the Pod hook scoped", Duration::from_secs(60), || async {
        let c = configs
            .get(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME)
            .await?;
        let scoped = c
            .webhooks
            .iter()
            .flatten()
            .filter(|h| h.name == "mpod.kb.io")
            .flat_map(|h| h.match_conditions.iter().flatten())
            .any(|m| m.expression.contains(ns));
        Ok(scoped.then_some(()))
    })
    .await
    .expect("scoped");
}

fn plain_pod(name: &str, app: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "app", "image": image("testapp", "v1")}]}
    }))
    .expect("pod")
}

/// Creates a Pod for real: how long the API server took, and what it answered.
async fn timed_create(pods: &Api<Pod>, pod: &Pod) -> (Duration, Result<Pod, kube::Error>) {
    let start = Instant::now();
    let res = pods.create(&PostParams::default(), pod).await;
    (start.elapsed(), res)
}

fn has_sidecar(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .is_some_and(|s| s.containers.iter().any(|c| c.name == "down-sidecar"))
}

/// A manager that is down (every replica gone) blocks only what Kruise-rs owns: a Pod nothing
/// of Kruise-rs concerns is created at once, as if Kruise-rs were not installed; a Pod a
/// SidecarSet selects is refused, never created without its sidecar; deleting an unconcerned
/// Pod works too. With the manager back, both behave as before.
#[tokio::test]
#[ignore = "the Pod hooks' scoping is off (webhook configuration::scope::SCOPED_POD_HOOKS): a new SidecarSet's Pods raced the scope"]
async fn serial_manager_down_blocks_only_what_it_owns() {
    if mode() != Mode::InCluster {
        eprintln!("in-cluster only: the test scales the installed manager");
        return;
    }
    let client = client().await.expect("cluster");
    let free = TestNamespace::create(&client, "e2e-down-free")
        .await
        .expect("ns");
    let meshed = TestNamespace::create(&client, "e2e-down-mesh")
        .await
        .expect("ns");
    let set = sc::new(
        &format!("{}-down", meshed.name),
        &meshed.name,
        "meshed",
        json!({"containers": [{"name": "down-sidecar", "image": image("sidecar", "v1")}]}),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set).await.expect("sidecarset");
    let free_pods: Api<Pod> = free.api();
    let mesh_pods: Api<Pod> = meshed.api();

    // Up: the SidecarSet injects (waiting out the scope's update after a new SidecarSet).
    wait_for(
        "injection with the manager up",
        Duration::from_secs(60),
        || async {
            let p = mesh_pods
                .create(
                    &PostParams {
                        dry_run: true,
                        ..Default::default()
                    },
                    &plain_pod("probe", "meshed"),
                )
                .await?;
            Ok(has_sidecar(&p).then_some(()))
        },
    )
    .await
    .expect("injected while up");

    // The manager scopes the Pod hook to the new SidecarSet once its watch shows it (and every
    // Pod for the few seconds before: see docs/safety.md).
    wait_scoped_to(&client, &meshed.name).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    wait_scoped_to(&client, &meshed.name).await;

    let down = ManagerScaled::to_zero(&client).await;
    let (took, res) = timed_create(&free_pods, &plain_pod("free-1", "other")).await;
    res.expect("a Pod nothing concerns is created with the manager down");
    eprintln!("manager down: unconcerned Pod created in {took:?}");
    assert!(took < Duration::from_secs(2), "created at once: {took:?}");
    let start = Instant::now();
    free_pods
        .delete("free-1", &DeleteParams::default())
        .await
        .expect("deleting an unconcerned Pod with the manager down");
    assert!(start.elapsed() < Duration::from_secs(2), "deleted at once");

    let (took, res) = timed_create(&mesh_pods, &plain_pod("meshed-1", "meshed")).await;
    let err = res.expect_err("a Pod the SidecarSet selects is refused with the manager down");
    eprintln!("manager down: SidecarSet Pod refused in {took:?}: {err}");
    let msg = err.to_string();
    assert!(
        msg.contains("Kruise-rs is down") && msg.contains(keys::WEBHOOK_SERVICE_NAME),
        "the refusal names Kruise-rs and what is down: {msg}"
    );
    assert!(
        mesh_pods.get_opt("meshed-1").await.expect("get").is_none(),
        "never created without its sidecar"
    );

    down.restore(&client).await;
    let injected = wait_for("the webhook back", Duration::from_secs(120), || async {
        match mesh_pods
            .create(&PostParams::default(), &plain_pod("meshed-2", "meshed"))
            .await
        {
            Ok(p) => Ok(Some(p)),
            Err(kube::Error::Api(e)) if e.code >= 500 => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await
    .expect("SidecarSet Pod created once the manager is back");
    assert!(has_sidecar(&injected), "injected again");
    let (took, res) = timed_create(&free_pods, &plain_pod("free-2", "other")).await;
    res.expect("unconcerned Pod with the manager back");
    assert!(took < Duration::from_secs(2), "{took:?}");
    guard.delete().await.expect("delete sidecarset");
    free.delete().await.expect("delete ns");
    meshed.delete().await.expect("delete ns");
}
