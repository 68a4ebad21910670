//! Feature gates that change what the webhook writes or serves, end to end, with the installed
//! manager reconfigured once for all of them: `EnhancedLivenessProbe` (a Pod's liveness probes
//! moved into an annotation), `TemplateNoDefaults` (a CloneSet's template stored as sent) and
//! `EnableExternalCerts` (the test plays cert-manager: it provisions the Secret and injects
//! the CA; the manager serves that certificate and writes neither the Secret nor a caBundle).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_api::features::Gate;
use kruise_api::keys;
use kruise_e2e::manager::{self, ManagerConfig};
use kruise_e2e::{TestNamespace, client, cloneset, wait_for};
use kube::Client;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The external Secret the test provisions (as cert-manager would, under another name than the
/// manager's own, which stays untouched for the restore).
const EXTERNAL_SECRET: &str = "kruise-rs-e2e-external-certs";

/// Plays cert-manager's issuer: a new CA and serving pair in [`EXTERNAL_SECRET`], under
/// cert-manager's keys. Returns the CA.
async fn provision_external_certs(client: &Client) -> String {
    let names = kruise_webhook::certs::serving_names(
        keys::WEBHOOK_SERVICE_NAME,
        keys::KRUISE_NAMESPACE,
        None,
    );
    let b = kruise_webhook::certs::generate_bundle(
        &names,
        SystemTime::now(),
        &kruise_webhook::certs::CertPolicy::default(),
    )
    .expect("certificates");
    let entry = |k: &str, v: &str| (k.to_owned(), ByteString(v.as_bytes().to_vec()));
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(EXTERNAL_SECRET.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            entry("ca.crt", &b.ca_cert),
            entry("tls.crt", &b.cert),
            entry("tls.key", &b.key),
        ])),
        ..Default::default()
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), keys::KRUISE_NAMESPACE);
    let _ = secrets
        .delete(EXTERNAL_SECRET, &DeleteParams::default())
        .await;
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create the external Secret");
    b.ca_cert
}

/// Plays cert-manager's CA injector: `ca` into every caBundle the manager would write. Done
/// once the gated manager runs: the installed one would patch the CRDs back at once.
async fn inject_ca(client: &Client, ca: &str) {
    let ca_b64 = ByteString(ca.as_bytes().to_vec());
    let pp = PatchParams::default();
    // A strategic merge patch, by webhook name: no conflict with the manager's own applies.
    let hooks = |names: Vec<String>| {
        json!({"webhooks": names.into_iter().map(|name| json!({"name": name,
            "clientConfig": {"caBundle": ca_b64}})).collect::<Vec<_>>()})
    };
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let m = mutating
        .get(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .expect("mutating configuration");
    let names = m
        .webhooks
        .iter()
        .flatten()
        .map(|h| h.name.clone())
        .collect();
    mutating
        .patch(
            keys::MUTATING_WEBHOOK_CONFIGURATION_NAME,
            &pp,
            &Patch::Strategic(hooks(names)),
        )
        .await
        .expect("inject the CA into the mutating configuration");
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let v = validating
        .get(keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .expect("validating configuration");
    let names = v
        .webhooks
        .iter()
        .flatten()
        .map(|h| h.name.clone())
        .collect();
    validating
        .patch(
            keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME,
            &pp,
            &Patch::Strategic(hooks(names)),
        )
        .await
        .expect("inject the CA into the validating configuration");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds.list(&ListParams::default()).await.expect("CRDs") {
        if !crd.name_any().ends_with(".kruise.io")
            || crd.spec.conversion.as_ref().map(|c| c.strategy.as_str()) != Some("Webhook")
        {
            continue;
        }
        let patch =
            json!({"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": ca_b64}}}}});
        crds.patch(&crd.name_any(), &pp, &Patch::Merge(&patch))
            .await
            .expect("inject the CA into a CRD");
    }
}

/// The caBundles of the mutating configuration and of the CloneSet CRD.
async fn ca_bundles(client: &Client) -> (Vec<Option<ByteString>>, Option<ByteString>) {
    let m = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .expect("mutating configuration");
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get("clonesets.apps.kruise.io")
        .await
        .expect("CloneSet CRD");
    (
        m.webhooks
            .iter()
            .flatten()
            .map(|h| h.client_config.ca_bundle.clone())
            .collect(),
        crd.spec
            .conversion
            .and_then(|c| c.webhook)
            .and_then(|w| w.client_config)
            .and_then(|c| c.ca_bundle),
    )
}

/// The manager runs with the three gates and an external Secret; once the test has injected
/// that Secret's CA, one CloneSet asking for the enhanced liveness probe is admitted (so the
/// manager serves the external certificate): its stored template has none of the Pod
/// defaults, and its Pod has no `livenessProbe`, the probe being kept in
/// `apps.kruise.io/container-probe-context`; the Secret and the injected caBundles are as the
/// test left them. A manager that ignores the gates serves its own certificate (the create is
/// never admitted), defaults the template and leaves the probe.
#[tokio::test]
async fn serial_webhook_gates_liveness_template_and_external_certs() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = client().await.expect("cluster");
    let started = std::time::Instant::now();
    let external_ca = provision_external_certs(&client).await;
    let gated = manager::reconfigure(
        &client,
        &ManagerConfig::default()
            .env(keys::ENV_WEBHOOK_SECRET_NAME, EXTERNAL_SECRET)
            .gates(&format!(
                "{}=true,{}=true,{}=true",
                Gate::EnhancedLivenessProbe.name(),
                Gate::TemplateNoDefaults.name(),
                Gate::EnableExternalCerts.name()
            )),
    )
    .await
    .expect("the manager runs with EnhancedLivenessProbe, TemplateNoDefaults and EnableExternalCerts on");
    inject_ca(&client, &external_ca).await;
    let ns = TestNamespace::create(&client, "e2e-wh-gates-on")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let mut cs = cloneset::new("live", 1, "v1", json!({})).expect("cs");
    cs.data["spec"]["template"]["metadata"]["annotations"] =
        json!({keys::USING_ENHANCED_LIVENESS_ANNOTATION: "true"});
    let probe = json!({"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 7});
    cs.data["spec"]["template"]["spec"]["containers"][0]["livenessProbe"] = probe.clone();
    // The API server picks the injected CA up within moments.
    let created = wait_for("the CloneSet admitted", Duration::from_secs(30), || async {
        Ok(api.create(&PostParams::default(), &cs).await.ok())
    })
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

    // EnableExternalCerts: every admission above went through the injected CA, so the manager
    // served the external certificate; it wrote neither the Secret nor any caBundle.
    let injected = ByteString(external_ca.into_bytes());
    let (hooks, crd) = ca_bundles(&client).await;
    assert!(
        hooks.iter().all(|b| b.as_ref() == Some(&injected)),
        "the manager rewrote a caBundle of its mutating configuration"
    );
    assert_eq!(
        crd.as_ref(),
        Some(&injected),
        "the manager patched the CloneSet CRD"
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), keys::KRUISE_NAMESPACE);
    let external = secrets
        .get(EXTERNAL_SECRET)
        .await
        .expect("the external Secret");
    let stored: Vec<&String> = external
        .data
        .as_ref()
        .map(|d| d.keys().collect())
        .unwrap_or_default();
    assert_eq!(
        stored,
        ["ca.crt", "tls.crt", "tls.key"],
        "the manager wrote the external Secret"
    );

    ns.delete().await.expect("delete ns");
    gated
        .restore(&client)
        .await
        .expect("the installed manager is back");
    // The installed manager puts its own CA back everywhere.
    let own = secrets
        .get(keys::WEBHOOK_SECRET_NAME)
        .await
        .expect("the manager's own Secret");
    let own_ca = own
        .data
        .as_ref()
        .and_then(|d| d.get(kruise_webhook::certs::CA_CERT).cloned())
        .expect("its CA");
    wait_for(
        "the manager's own CA back in place",
        Duration::from_secs(60),
        || {
            let (client, own_ca) = (client.clone(), own_ca.clone());
            async move {
                let (hooks, crd) = ca_bundles(&client).await;
                let back = hooks.iter().all(|b| b.as_ref() == Some(&own_ca))
                    && crd.as_ref() == Some(&own_ca);
                Ok(back.then_some(()))
            }
        },
    )
    .await
    .expect("the manager's CA restored");
    let _ = secrets
        .delete(EXTERNAL_SECRET, &DeleteParams::default())
        .await;
    eprintln!("webhook gates test took {:?}", started.elapsed());
}
