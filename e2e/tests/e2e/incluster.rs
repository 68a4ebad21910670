//! Kruise-rs installed in the cluster from deploy/ (hack/install.sh): the manager and the daemon
//! run under their own ServiceAccounts, their RBAC is least-privilege, and a standby manager
//! replica takes over a rollout when the leader dies. Run by the suite and serial stages of `make test`.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kruise_api::keys;
use kruise_e2e::cloneset::{self, pod_revision, set_image, wait_rolled_out, wait_status};
use kruise_e2e::{TestNamespace, client, container_status, mode, wait_for};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kube::{Api, Client, Config, ResourceExt};
use serde_json::json;

const NS: &str = "kruise-system";
const MANAGER_SA: &str = "system:serviceaccount:kruise-system:kruise-manager";
const DAEMON_SA: &str = "system:serviceaccount:kruise-system:kruise-daemon";

async fn allowed(
    client: &Client,
    user: &str,
    verb: &str,
    resource: &str,
    sub: &str,
    group: &str,
    ns: Option<&str>,
) -> bool {
    allowed_named(client, user, verb, resource, sub, group, ns, "").await
}

/// `allowed` for one object by name (RBAC resourceNames).
#[allow(clippy::too_many_arguments)]
async fn allowed_named(
    client: &Client,
    user: &str,
    verb: &str,
    resource: &str,
    sub: &str,
    group: &str,
    ns: Option<&str>,
    name: &str,
) -> bool {
    let sar: SubjectAccessReview = serde_json::from_value(json!({
        "spec": {
            "user": user,
            "groups": ["system:serviceaccounts", "system:serviceaccounts:kruise-system", "system:authenticated"],
            "resourceAttributes": {
                "verb": verb, "resource": resource, "subresource": sub, "group": group,
                "namespace": ns.unwrap_or(""), "name": name
            }
        }
    }))
    .expect("SAR");
    let out = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &sar)
        .await
        .expect("create SubjectAccessReview");
    out.status.is_some_and(|s| s.allowed)
}

#[tokio::test]
async fn components_run_under_their_own_service_accounts() {
    let client = client().await.expect("cluster");
    let deploy = Api::<Deployment>::namespaced(client.clone(), NS)
        .get("kruise-controller-manager")
        .await
        .expect("manager Deployment (is Kruise-rs installed? make install)");
    assert_eq!(
        deploy.status.as_ref().and_then(|s| s.ready_replicas),
        Some(2),
        "both manager replicas ready"
    );
    let ds = Api::<DaemonSet>::namespaced(client.clone(), NS)
        .get("kruise-daemon")
        .await
        .expect("daemon DaemonSet");
    let st = ds.status.expect("daemon status");
    assert_eq!(
        st.number_ready, st.desired_number_scheduled,
        "a ready daemon on every node"
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for (selector, sa) in [
        ("app.kubernetes.io/name=kruise-manager", "kruise-manager"),
        ("app.kubernetes.io/name=kruise-daemon", "kruise-daemon"),
    ] {
        let list = pods
            .list(&ListParams::default().labels(selector))
            .await
            .expect("pods");
        assert!(!list.items.is_empty(), "{selector}");
        for p in list.items {
            assert_eq!(
                p.spec
                    .as_ref()
                    .and_then(|s| s.service_account_name.as_deref()),
                Some(sa),
                "{}",
                p.name_any()
            );
        }
    }
    // The daemon sees only the runtime socket's directory of the host, not all of /var/run.
    let daemon_pod = mode::daemon_pod(&client).await.expect("a daemon Pod");
    let host_paths: Vec<String> = daemon_pod
        .spec
        .and_then(|s| s.volumes)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|v| v.host_path.map(|h| h.path))
        .collect();
    assert_eq!(host_paths, vec!["/var/run/containerd".to_string()]);
    let lease = Api::<Lease>::namespaced(client.clone(), NS)
        .get("kruise-manager")
        .await
        .expect("leader Lease");
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert!(
        holder.starts_with("kruise-controller-manager-"),
        "a manager Pod leads: {holder}"
    );
}

#[tokio::test]
async fn rbac_is_least_privilege() {
    let client = client().await.expect("cluster");
    // The daemon reads pull secrets only from kruise-daemon-config.
    assert!(
        allowed(
            &client,
            DAEMON_SA,
            "get",
            "secrets",
            "",
            "",
            Some(keys::KRUISE_DAEMON_CONFIG_NAMESPACE)
        )
        .await
    );
    assert!(
        !allowed(
            &client,
            DAEMON_SA,
            "get",
            "secrets",
            "",
            "",
            Some("default")
        )
        .await,
        "daemon must not read Secrets elsewhere"
    );
    assert!(!allowed(&client, DAEMON_SA, "list", "secrets", "", "", None).await);
    // It writes Pod status (runtime-containers-meta goes through pods/status), never Pod specs.
    assert!(
        allowed(
            &client,
            DAEMON_SA,
            "patch",
            "pods",
            "status",
            "",
            Some("default")
        )
        .await,
        "daemon must patch pods/status to report runtime-containers-meta"
    );
    for verb in ["patch", "update"] {
        assert!(
            !allowed(&client, DAEMON_SA, verb, "pods", "", "", Some("default")).await,
            "daemon must not {verb} Pod specs"
        );
    }
    // It writes status, not specs; never deletes pods; never touches workloads.
    assert!(
        allowed(
            &client,
            DAEMON_SA,
            "patch",
            "nodeimages",
            "status",
            keys::APPS_GROUP,
            None
        )
        .await
    );
    assert!(
        !allowed(
            &client,
            DAEMON_SA,
            "update",
            "nodeimages",
            "",
            keys::APPS_GROUP,
            None
        )
        .await
    );
    assert!(
        !allowed(
            &client,
            DAEMON_SA,
            "delete",
            "pods",
            "",
            "",
            Some("default")
        )
        .await
    );
    assert!(
        !allowed(
            &client,
            DAEMON_SA,
            "patch",
            "clonesets",
            "",
            keys::APPS_GROUP,
            Some("default")
        )
        .await
    );
    // The manager manages workloads but is no cluster admin.
    assert!(
        allowed(
            &client,
            MANAGER_SA,
            "create",
            "pods",
            "",
            "",
            Some("default")
        )
        .await
    );
    assert!(
        allowed(
            &client,
            MANAGER_SA,
            "patch",
            "pods",
            "resize",
            "",
            Some("default")
        )
        .await
    );
    assert!(!allowed(&client, MANAGER_SA, "delete", "nodes", "", "", None).await);
    // It writes its own webhook configurations and CRDs, nobody else's.
    for (resource, group, own) in [
        (
            "mutatingwebhookconfigurations",
            "admissionregistration.k8s.io",
            keys::MUTATING_WEBHOOK_CONFIGURATION_NAME,
        ),
        (
            "validatingwebhookconfigurations",
            "admissionregistration.k8s.io",
            keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME,
        ),
        (
            "customresourcedefinitions",
            "apiextensions.k8s.io",
            "clonesets.apps.kruise.io",
        ),
    ] {
        assert!(
            allowed_named(&client, MANAGER_SA, "patch", resource, "", group, None, own).await,
            "manager patches its own {resource} {own}"
        );
        assert!(
            !allowed_named(
                &client,
                MANAGER_SA,
                "patch",
                resource,
                "",
                group,
                None,
                "someone-else"
            )
            .await,
            "manager must not patch another {resource}"
        );
    }
    // Every CRD we ship with a conversion webhook, whose caBundle it writes.
    for crd in kruise_api::crds::all().expect("CRDs") {
        if crd.spec.conversion.as_ref().map(|c| c.strategy.as_str()) != Some("Webhook") {
            continue;
        }
        let name = crd.metadata.name.unwrap_or_default();
        assert!(
            allowed_named(
                &client,
                MANAGER_SA,
                "patch",
                "customresourcedefinitions",
                "",
                "apiextensions.k8s.io",
                None,
                &name
            )
            .await,
            "manager patches the conversion caBundle of {name}"
        );
    }
    assert!(
        !allowed(
            &client,
            MANAGER_SA,
            "create",
            "clusterrolebindings",
            "",
            "rbac.authorization.k8s.io",
            None
        )
        .await
    );
    assert!(
        !allowed(
            &client,
            MANAGER_SA,
            "update",
            "leases",
            "",
            "coordination.k8s.io",
            Some("default")
        )
        .await,
        "leases only in kruise-system"
    );
}

/// A client that authenticates exactly as the daemon Pod does: a token bound to that Pod, which
/// carries its node's name.
async fn daemon_client(admin: &Client) -> (Client, String) {
    let pod = mode::daemon_pod(admin).await.expect("a daemon Pod");
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("scheduled");
    let req: TokenRequest = serde_json::from_value(json!({
        "spec": {
            "audiences": [],
            "expirationSeconds": 600,
            "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": pod.name_any(), "uid": pod.uid()}
        }
    }))
    .expect("TokenRequest");
    let sa: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
    let token = sa
        .create_token_request("kruise-daemon", &PostParams::default(), &req)
        .await
        .expect("token for the daemon")
        .status
        .expect("token status")
        .token;
    let mut cfg = Config::infer().await.expect("kubeconfig");
    cfg.auth_info = Default::default();
    cfg.auth_info.token = Some(token.into());
    (Client::try_from(cfg).expect("daemon client"), node)
}

#[tokio::test]
async fn daemon_may_write_only_its_own_nodes_objects() {
    let admin = client().await.expect("cluster");
    let (daemon, node) = daemon_client(&admin).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(keys::APPS_GROUP, keys::VERSION_V1BETA1, "NodeImage"),
        "nodeimages",
    );
    let admin_ni: Api<DynamicObject> = Api::all_with(admin.clone(), &ar);
    let daemon_ni: Api<DynamicObject> = Api::all_with(daemon, &ar);
    let other = "e2e-other-node";
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": keys::APPS_V1BETA1, "kind": "NodeImage",
        // Marked fake, or the NodeImage controller removes it at once: no such node exists.
        "metadata": {"name": other, "labels": {keys::FAKE_NODEIMAGE_LABEL: "true"}}, "spec": {}
    }))
    .expect("NodeImage");
    let _ = admin_ni.create(&PostParams::default(), &obj).await;
    let status =
        json!({"status": {"desired": 0, "succeeded": 0, "failed": 0, "pulling": 0, "waiting": 0}});
    let denied = daemon_ni
        .patch_status(other, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect_err("another node's NodeImage must be refused");
    assert!(
        denied.to_string().contains("may not write"),
        "refused by the own-node policy: {denied}"
    );
    // Its own node's NodeImage is fine (the manager creates one per node).
    wait_for("the node's NodeImage", Duration::from_secs(60), || async {
        Ok(admin_ni.get_opt(&node).await?)
    })
    .await
    .expect("NodeImage of the node");
    // Write back what the status holds (the daemon's own numbers), or zeros if it has none yet.
    let own = admin_ni.get(&node).await.expect("own NodeImage");
    let own_status = match own.data.get("status") {
        Some(st) if st.get("desired").is_some() => json!({"status": st}),
        _ => status.clone(),
    };
    daemon_ni
        .patch_status(&node, &PatchParams::default(), &Patch::Merge(&own_status))
        .await
        .expect("the daemon may write its own node's NodeImage status");
    admin_ni
        .delete(other, &DeleteParams::default())
        .await
        .expect("clean up");
}

/// Killing the leading manager Pod mid-rollout: the standby takes over, the rollout completes, and
/// no container restarts twice.
#[tokio::test]
async fn serial_standby_manager_finishes_the_rollout() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-failover")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let strategy = json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}});
    api.create(
        &PostParams::default(),
        &cloneset::new("web", 4, "v1", strategy).expect("cs"),
    )
    .await
    .expect("create");
    let first = wait_rolled_out(&api, "web", 4, Duration::from_secs(180))
        .await
        .expect("initial rollout");
    let before: Vec<(String, String)> = cloneset::pods(&pods, "web")
        .await
        .expect("pods")
        .iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect();

    set_image(&api, "web", "v2").await.expect("set image");
    let rev = wait_status(
        &api,
        "web",
        "first Pod updated",
        Duration::from_secs(120),
        |cs| {
            cloneset::status_i64(cs, "updatedReplicas") >= 1
                && cloneset::status_str(cs, "updateRevision")
                    != cloneset::status_str(&first, "updateRevision")
        },
    )
    .await
    .expect("rollout started");
    let lease = Api::<Lease>::namespaced(client.clone(), NS)
        .get("kruise-manager")
        .await
        .expect("lease");
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    let leader_pod = holder.split('_').next().unwrap_or_default().to_string();
    Api::<Pod>::namespaced(client.clone(), NS)
        .delete(
            &leader_pod,
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await
        .expect("kill the leader");

    wait_rolled_out(&api, "web", 4, Duration::from_secs(240))
        .await
        .expect("the standby finishes the rollout");
    let after = cloneset::pods(&pods, "web").await.expect("pods");
    for (name, uid) in &before {
        let p = after
            .iter()
            .find(|p| &p.name_any() == name)
            .unwrap_or_else(|| panic!("{name} was replaced"));
        assert_eq!(p.uid().as_deref(), Some(uid.as_str()));
        assert_eq!(
            container_status(p, "app").map(|c| c.restart_count),
            Some(1),
            "{name} restarted exactly once"
        );
        assert_eq!(
            pod_revision(p),
            cloneset::status_str(&rev, "updateRevision")
        );
    }
    let new_holder = Api::<Lease>::namespaced(client.clone(), NS)
        .get("kruise-manager")
        .await
        .expect("lease")
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert!(
        !new_holder.starts_with(&leader_pod),
        "another replica leads now: {new_holder}"
    );
    // The new leader must be an installed manager Pod, not some other process holding the Lease
    // (a dev-mode manager on the host would also finish the rollout).
    let new_pod = new_holder.split('_').next().unwrap_or_default();
    let manager_pods = Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels("app.kubernetes.io/name=kruise-manager"))
        .await
        .expect("manager pods");
    assert!(
        manager_pods.items.iter().any(|p| p.name_any() == new_pod),
        "the Lease holder {new_holder} is one of the manager Pods {:?}",
        manager_pods
            .items
            .iter()
            .map(|p| p.name_any())
            .collect::<Vec<_>>()
    );
    ns.delete().await.expect("delete ns");
}
