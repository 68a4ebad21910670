//! Runs the webhook in dev mode against the cluster in `KUBECONFIG`: certificates in the Secret,
//! configurations pointing at `https://127.0.0.1:<port>`, then waits for Ctrl-C (or, with
//! `--check`, creates a dry-run Pod and CloneSet through the API server and exits).
//!
//! With `--cleanup` the two webhook configurations are deleted on exit, so a stopped dev
//! webhook does not block pod creation in a shared cluster (failurePolicy is Fail).
//!
//! `--no-crd` leaves CRD conversion settings alone.
//!
//! `cargo run -p kruise-webhook --example dev_webhook -- [--port 9876] [--check] [--cleanup] [--no-crd]`

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kruise_api::keys;
use kruise_webhook::{WebhookConfig, run, wait_ready};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,kruise_webhook=debug".into()),
        )
        .init();
    let args: Vec<String> = std::env::args().collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let port: u16 = args
        .iter()
        .position(|a| a == "--port")
        .and_then(|i| args.get(i + 1))
        .and_then(|p| p.parse().ok())
        .unwrap_or(keys::WEBHOOK_PORT);

    let client = kube::Client::try_default().await?;
    let mut cfg = WebhookConfig::from_env();
    cfg.bind_addr.set_port(port);
    cfg.host_url = Some(format!("https://127.0.0.1:{port}"));
    cfg.manage_crd_conversion = !flag("--no-crd");

    // The Secret lives in the manager's namespace; make sure it exists in a fresh cluster.
    let ns_api: Api<Namespace> = Api::all(client.clone());
    if ns_api.get_opt(&cfg.namespace).await?.is_none() {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": cfg.namespace}}))?;
        ns_api.create(&PostParams::default(), &ns).await?;
    }

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let mut server = tokio::spawn(run(client.clone(), cfg.clone(), async {
        let _ = stop_rx.await;
    }));
    tokio::select! {
        r = wait_ready(&cfg, Duration::from_secs(30)) => r?,
        r = &mut server => return Err(format!("webhook stopped: {r:?}").into()),
    }
    tracing::info!("webhook ready");

    let result = if flag("--check") {
        check(&client).await
    } else {
        tokio::signal::ctrl_c().await?;
        Ok(())
    };
    let _ = stop_tx.send(());
    let _ = server.await;
    if flag("--cleanup") {
        let dp = DeleteParams::default();
        let _ = Api::<MutatingWebhookConfiguration>::all(client.clone())
            .delete(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME, &dp)
            .await;
        let _ = Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .delete(keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME, &dp)
            .await;
        tracing::info!("webhook configurations deleted");
    }
    result
}

/// Dry-run creates go through admission webhooks without persisting anything.
async fn check(client: &kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "webhook-check",
            "annotations": {"apps.kruise.io/container-launch-priority": "Ordered"},
            "ownerReferences": [{"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
                "name": "x", "uid": "00000000-0000-0000-0000-000000000000", "controller": true}]},
        "spec": {"containers": [{"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}]}
    }))?;
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let created = pods.create(&pp, &pod).await?;
    let gates = created
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.clone());
    println!("pod readinessGates: {}", serde_json::to_string(&gates)?);
    let env = created.spec.as_ref().map(|s| {
        s.containers
            .iter()
            .map(|c| c.env.clone())
            .collect::<Vec<_>>()
    });
    println!("pod env: {}", serde_json::to_string(&env)?);
    Ok(())
}
