//! Feature gates that change what the webhook writes, end to end, with the installed manager
//! reconfigured once for all of them: `EnhancedLivenessProbe` (a Pod's liveness probes moved
//! into an annotation) and `TemplateNoDefaults` (a CloneSet's template stored as sent).
//! `EnableExternalCerts` is covered by the webhook crate's unit tests only (see
//! docs/external-certs.md): running it here would need a certificate issuer in the cluster.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::features::Gate;
use kruise_api::keys;
use kruise_e2e::manager::{self, ManagerConfig};
use kruise_e2e::{TestNamespace, client, cloneset, wait_for};
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

/// One CloneSet asking for the enhanced liveness probe, created while both gates are on: its
/// stored template has none of the Pod defaults, and its Pod has no `livenessProbe`, the probe
/// being kept in `apps.kruise.io/container-probe-context`. On a manager that ignores the gates
/// the template carries `terminationMessagePath` and `imagePullPolicy` and the Pod its probe.
#[tokio::test]
#[ignore = "needs a cluster with Kruise-rs installed"]
async fn serial_webhook_gates_enhanced_liveness_and_template_no_defaults() {
    let client = client().await.expect("cluster");
    let gated = manager::reconfigure(
        &client,
        &ManagerConfig::default().gates(&format!(
            "{}=true,{}=true",
            Gate::EnhancedLivenessProbe.name(),
            Gate::TemplateNoDefaults.name()
        )),
    )
    .await
    .expect("the manager runs with EnhancedLivenessProbe and TemplateNoDefaults on");
    let ns = TestNamespace::create(&client, "e2e-wh-gates-on")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let mut cs = cloneset::new("live", 1, "v1", json!({})).expect("cs");
    cs.data["spec"]["template"]["metadata"]["annotations"] =
        json!({keys::USING_ENHANCED_LIVENESS_ANNOTATION: "true"});
    let probe = json!({"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 7});
    cs.data["spec"]["template"]["spec"]["containers"][0]["livenessProbe"] = probe.clone();
    let created = api
        .create(&PostParams::default(), &cs)
        .await
        .expect("create CloneSet");

    // TemplateNoDefaults: the stored template is the one sent.
    let container = &created.data["spec"]["template"]["spec"]["containers"][0];
    for field in ["terminationMessagePath", "imagePullPolicy"] {
        assert_eq!(
            container.get(field),
            None,
            "the stored template was defaulted: {container}"
        );
    }
    assert_eq!(
        created.data["spec"]["template"]["spec"].get("restartPolicy"),
        None
    );

    // EnhancedLivenessProbe: the Pod has no liveness probe, and the backup names it.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let pod = wait_for("the CloneSet's Pod", Duration::from_secs(60), || async {
        let list = pods.list(&ListParams::default().labels("app=live")).await?;
        Ok(list.items.into_iter().next())
    })
    .await
    .expect("a Pod");
    let spec = pod.spec.as_ref().expect("spec");
    assert_eq!(
        spec.containers[0].liveness_probe, None,
        "the Pod kept its liveness probe"
    );
    let backup = pod
        .annotations()
        .get(keys::CONTAINER_PROBE_CONTEXT_ANNOTATION)
        .unwrap_or_else(|| {
            panic!(
                "no {} on {}",
                keys::CONTAINER_PROBE_CONTEXT_ANNOTATION,
                pod.name_any()
            )
        });
    let backup: Value = serde_json::from_str(backup).expect("the backup is JSON");
    assert_eq!(backup[0]["name"], "app", "{backup}");
    // The API server has defaulted the probe before the webhook saw it.
    assert_eq!(
        backup[0]["livenessProbe"]["httpGet"]["path"], "/",
        "{backup}"
    );
    assert_eq!(backup[0]["livenessProbe"]["periodSeconds"], 7, "{backup}");
    assert_eq!(backup[0]["livenessProbe"]["timeoutSeconds"], 1, "{backup}");

    ns.delete().await.expect("delete ns");
    gated
        .restore(&client)
        .await
        .expect("the installed manager is back");
}
