//! Which Pods the Pod webhook sees, and what a manager that is down refuses. The webhook skips
//! kube-system, Kruise's own namespace and namespaces labelled `kruise.io/webhook-exempt`; while
//! nothing serves it, only the Pods Kruise-rs concerns are refused (the serial test scales the
//! manager to zero, then empties the webhook Service). Server-side dry runs show what admission
//! did to a Pod without running it. Runs in dev mode and in cluster.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kruise_api::keys;
use kruise_e2e::manager::MANAGER_DEPLOYMENT;
use kruise_e2e::mode::{KRUISE_NS, MANAGER_POD_SELECTOR, Mode, mode};
use kruise_e2e::sidecarset::{self as sc, Guard};
use kruise_e2e::{TestNamespace, client, image, pod_ready, wait_for};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
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
        on_own_runtime(move |client| async move { scale_manager(&client, replicas).await });
    }
}

/// Runs `f` with a fresh client on a runtime of its own, in a thread of its own: a guard's
/// `drop` (a failing test unwinding) cannot await on the test's runtime.
fn on_own_runtime<F, Fut>(f: F)
where
    F: FnOnce(Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let _ = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let client = client().await.expect("cluster");
            f(client).await;
        });
    })
    .join();
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

/// Waits until what a down manager refuses names `ns` (the SidecarSet's namespace): the
/// admission policy's condition, with `mpod.kb.io` failing open beside it.
async fn wait_scoped_to(client: &Client, ns: &str) {
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    wait_for("the policy scoped", Duration::from_secs(60), || async {
        let c = configs
            .get(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME)
            .await?;
        let hook = c
            .webhooks
            .iter()
            .flatten()
            .find(|h| h.name == "mpod.kb.io")
            .expect("mpod.kb.io");
        let open =
            hook.failure_policy.as_deref() == Some("Ignore") && hook.match_conditions.is_none();
        let Some(policy) = policies.get_opt(keys::POD_WEBHOOK_POLICY_NAME).await? else {
            return Ok(None);
        };
        let scoped = policy
            .spec
            .iter()
            .flat_map(|s| s.match_conditions.iter().flatten())
            .any(|m| m.expression.contains(ns));
        Ok((open && scoped).then_some(()))
    })
    .await
    .expect("scoped");
}

/// The webhook Service's selector, set back when dropped: while it selects nothing the Service
/// has no endpoints, though the manager runs. The manager Pods are replaced once the endpoints
/// are gone: the API server keeps its open connections to a webhook, whatever the Service says.
struct ServiceEmptied {
    selector: serde_json::Value,
    restored: bool,
}

impl ServiceEmptied {
    async fn empty(client: &Client) -> Self {
        let services: Api<Service> = Api::namespaced(client.clone(), KRUISE_NS);
        let svc = services
            .get(keys::WEBHOOK_SERVICE_NAME)
            .await
            .expect("webhook Service");
        let selector = json!(svc.spec.and_then(|s| s.selector).unwrap_or_default());
        set_selector(client, json!({"e2e.kruise.io/selects": "nothing"})).await;
        let endpoints: Api<EndpointSlice> = Api::namespaced(client.clone(), KRUISE_NS);
        let lp = ListParams::default().labels(&format!(
            "kubernetes.io/service-name={}",
            keys::WEBHOOK_SERVICE_NAME
        ));
        wait_for("the endpoints gone", Duration::from_secs(60), || async {
            let slices = endpoints.list(&lp).await?.items;
            let none = slices.iter().all(|s| s.endpoints.is_empty());
            Ok(none.then_some(()))
        })
        .await
        .expect("endpoints gone");
        replace_manager_pods(client).await;
        Self {
            selector,
            restored: false,
        }
    }

    async fn restore(mut self, client: &Client) {
        self.restored = true;
        set_selector(client, self.selector.clone()).await;
    }
}

impl Drop for ServiceEmptied {
    fn drop(&mut self) {
        if self.restored {
            return;
        }
        let selector = self.selector.clone();
        on_own_runtime(move |client| async move { set_selector(&client, selector).await });
    }
}

/// Deletes the manager Pods and waits until as many new ones run, Ready.
async fn replace_manager_pods(client: &Client) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), KRUISE_NS);
    let lp = ListParams::default().labels(MANAGER_POD_SELECTOR);
    let old: Vec<String> = pods
        .list(&lp)
        .await
        .expect("manager Pods")
        .items
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    pods.delete_collection(&DeleteParams::default(), &lp)
        .await
        .expect("delete the manager Pods");
    wait_for("new manager Pods", Duration::from_secs(180), || async {
        let live = pods.list(&lp).await?.items;
        let fresh = live.len() == old.len()
            && live.iter().all(|p| {
                pod_ready(p) && !old.contains(&p.metadata.uid.clone().unwrap_or_default())
            });
        Ok(fresh.then_some(()))
    })
    .await
    .expect("manager Pods replaced");
}

/// Replaces the webhook Service's selector (a JSON merge patch would keep the old keys).
async fn set_selector(client: &Client, selector: serde_json::Value) {
    let services: Api<Service> = Api::namespaced(client.clone(), KRUISE_NS);
    services
        .patch(
            keys::WEBHOOK_SERVICE_NAME,
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([
                    {"op": "replace", "path": "/spec/selector", "value": selector}
                ]))
                .expect("patch"),
            ),
        )
        .await
        .expect("set the webhook Service's selector");
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

/// While nothing serves the webhook (`what`): a Pod nothing of Kruise-rs concerns is created
/// and deleted at once, as if Kruise-rs were not installed; a Pod the SidecarSet selects is
/// refused, naming Kruise-rs and what is down, never created without its sidecar.
async fn assert_down_blocks_only_what_it_owns(
    free_pods: &Api<Pod>,
    mesh_pods: &Api<Pod>,
    what: &str,
    n: usize,
) {
    let free = format!("free-{n}");
    let (took, res) = timed_create(free_pods, &plain_pod(&free, "other")).await;
    res.unwrap_or_else(|e| panic!("{what}: a Pod nothing concerns is refused: {e}"));
    eprintln!("{what}: unconcerned Pod created in {took:?}");
    assert!(
        took < Duration::from_secs(2),
        "{what}: created at once: {took:?}"
    );
    let start = Instant::now();
    free_pods
        .delete(&free, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("{what}: deleting an unconcerned Pod: {e}"));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{what}: deleted at once"
    );

    let meshed = format!("meshed-{n}");
    let (took, res) = timed_create(mesh_pods, &plain_pod(&meshed, "meshed")).await;
    let err = res.expect_err("a Pod the SidecarSet selects is refused while nothing serves");
    eprintln!("{what}: SidecarSet Pod refused in {took:?}: {err}");
    let msg = err.to_string();
    assert!(
        msg.contains("Kruise-rs is down") && msg.contains(keys::WEBHOOK_SERVICE_NAME),
        "{what}: the refusal names Kruise-rs and what is down: {msg}"
    );
    assert!(
        mesh_pods.get_opt(&meshed).await.expect("get").is_none(),
        "{what}: never created without its sidecar"
    );
}

/// Once the webhook serves again, a SidecarSet Pod gets its sidecar and an unconcerned one is
/// created at once.
async fn assert_back(free_pods: &Api<Pod>, mesh_pods: &Api<Pod>, what: &str, n: usize) {
    let meshed = format!("meshed-back-{n}");
    let injected = wait_for(what, Duration::from_secs(120), || async {
        match mesh_pods
            .create(&PostParams::default(), &plain_pod(&meshed, "meshed"))
            .await
        {
            Ok(p) => Ok(Some(p)),
            Err(kube::Error::Api(e)) if e.code >= 500 || e.code == 403 => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await
    .expect("SidecarSet Pod created once the webhook serves again");
    assert!(has_sidecar(&injected), "{what}: injected again");
    let (took, res) = timed_create(free_pods, &plain_pod(&format!("free-back-{n}"), "other")).await;
    res.expect("unconcerned Pod with the webhook back");
    assert!(took < Duration::from_secs(2), "{what}: {took:?}");
}

/// A manager that is down (every replica gone), and one whose webhook Service has no endpoints,
/// block only what Kruise-rs owns (see [`assert_down_blocks_only_what_it_owns`]); with the
/// webhook back, both behave as before. Injection does not wait for the scope: the Pod hook
/// sees every Pod while the manager is up.
#[tokio::test]
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

    // Up: the SidecarSet injects once the webhook's SidecarSet watch shows it. Each manager
    // replica has its own watch, so a Pod created within milliseconds of its SidecarSet can
    // reach a replica that has not seen it yet (as upstream's informer cache; its e2e sleeps a
    // second). The hook does not wait for the scope: it sees every Pod.
    let start = Instant::now();
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
    eprintln!(
        "manager up: injection {:?} after the SidecarSet",
        start.elapsed()
    );
    let first = mesh_pods
        .create(&PostParams::default(), &plain_pod("meshed-0", "meshed"))
        .await
        .expect("a Pod of the SidecarSet");
    assert!(has_sidecar(&first), "injected with the manager up");
    let plain = free_pods
        .create(&PostParams::default(), &plain_pod("free-0", "other"))
        .await
        .expect("an unconcerned Pod");
    assert!(
        !plain
            .annotations()
            .contains_key(keys::POD_WEBHOOK_ADMITTED_ANNOTATION),
        "an unconcerned Pod is not marked"
    );

    // The policy's scope names the SidecarSet's namespace once the manager's watch shows it.
    wait_scoped_to(&client, &meshed.name).await;

    let down = ManagerScaled::to_zero(&client).await;
    assert_down_blocks_only_what_it_owns(&free_pods, &mesh_pods, "manager down", 1).await;
    down.restore(&client).await;
    assert_back(&free_pods, &mesh_pods, "manager back", 1).await;

    let emptied = ServiceEmptied::empty(&client).await;
    assert_down_blocks_only_what_it_owns(&free_pods, &mesh_pods, "no endpoints", 2).await;
    emptied.restore(&client).await;
    assert_back(&free_pods, &mesh_pods, "endpoints back", 2).await;

    guard.delete().await.expect("delete sidecarset");
    free.delete().await.expect("delete ns");
    meshed.delete().await.expect("delete ns");
}
