//! The webhook configurations: present, a valid caBundle on every webhook, and an endpoint that
//! answers.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use kruise_api::keys;
use kube::{Api, Client};

use super::{Check, FIX_INSTALL};
use crate::error::{Result, kube_err};

pub(super) async fn check_webhooks(client: &Client) -> Result<Vec<Check>> {
    let mut out = Vec::new();
    let m: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let mutating = m
        .get_opt(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .map_err(kube_err)?
        .map(|c| {
            c.webhooks
                .unwrap_or_default()
                .into_iter()
                .map(|w| (w.name, w.client_config))
                .collect::<Vec<_>>()
        });
    let v: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let validating = v
        .get_opt(keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .map_err(kube_err)?
        .map(|c| {
            c.webhooks
                .unwrap_or_default()
                .into_iter()
                .map(|w| (w.name, w.client_config))
                .collect::<Vec<_>>()
        });
    for (name, hooks) in [
        (keys::MUTATING_WEBHOOK_CONFIGURATION_NAME, mutating),
        (keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME, validating),
    ] {
        let title = format!("webhook configuration {name}");
        let Some(hooks) = hooks else {
            out.push(Check::fail(
                title,
                "missing",
                "the manager creates it when its webhook starts: kubectl -n kruise-system logs deploy/kruise-controller-manager",
            ));
            continue;
        };
        out.push(check_hooks(client, title, &hooks).await);
    }
    Ok(out)
}

async fn check_hooks(
    client: &Client,
    title: String,
    hooks: &[(String, WebhookClientConfig)],
) -> Check {
    let Some((_, first)) = hooks.first() else {
        return Check::fail(title, "has no webhooks", FIX_INSTALL);
    };
    for (hook, cc) in hooks {
        if let Err(why) = ca_bundle_valid(cc) {
            return Check::fail(
                title,
                format!("webhook {hook}: {why}"),
                "restart the manager so it re-registers its CA: kubectl -n kruise-system rollout restart deploy/kruise-controller-manager",
            );
        }
    }
    match endpoint_answers(client, first).await {
        Ok(at) => Check::pass(
            title,
            format!("{} webhooks, caBundle valid, {at} answers", hooks.len()),
        ),
        Err(why) => Check::fail(
            title,
            why,
            "is the manager running and Ready? kubectl -n kruise-system get pods; in dev mode, is `kubectl kruise dev` running?",
        ),
    }
}

/// The caBundle is a PEM certificate that has not expired.
fn ca_bundle_valid(cc: &WebhookClientConfig) -> std::result::Result<(), String> {
    let Some(ca) = &cc.ca_bundle else {
        return Err("no caBundle".into());
    };
    let pem = String::from_utf8(ca.0.clone()).map_err(|_| "caBundle is not PEM text".to_owned())?;
    let not_after = kruise_webhook::certs::not_after(&pem)
        .ok_or_else(|| "caBundle is not a PEM certificate".to_owned())?;
    if not_after <= std::time::SystemTime::now() {
        return Err("caBundle certificate has expired".into());
    }
    Ok(())
}

/// Asks the webhook's `/healthz`: through the API server's Service proxy in cluster, by a TCP
/// connection to a dev-mode URL.
async fn endpoint_answers(
    client: &Client,
    cc: &WebhookClientConfig,
) -> std::result::Result<String, String> {
    if let Some(s) = &cc.service {
        let port = s.port.unwrap_or(443);
        let path = format!(
            "/api/v1/namespaces/{}/services/https:{}:{port}/proxy{}",
            s.namespace,
            s.name,
            keys::WEBHOOK_HEALTHZ_PATH
        );
        let req = http::Request::get(&path)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let at = format!("service {}/{}", s.namespace, s.name);
        return match tokio::time::timeout(Duration::from_secs(5), client.request_text(req)).await {
            Ok(Ok(_)) => Ok(at),
            Ok(Err(e)) => Err(format!("{at} does not answer /healthz: {e}")),
            Err(_) => Err(format!("{at} does not answer /healthz within 5s")),
        };
    }
    let Some(url) = &cc.url else {
        return Err("neither a Service nor a URL".into());
    };
    let authority = url
        .split_once("://")
        .map_or(url.as_str(), |(_, r)| r)
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    match tokio::time::timeout(
        Duration::from_secs(3),
        tokio::net::TcpStream::connect(&authority),
    )
    .await
    {
        Ok(Ok(_)) => Ok(url.clone()),
        Ok(Err(e)) => Err(format!("{url} refuses connections: {e}")),
        Err(_) => Err(format!("{url} does not accept a connection within 3s")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_garbage_ca_bundle_is_invalid() {
        let cc = WebhookClientConfig {
            ca_bundle: Some(k8s_openapi::ByteString(b"not a cert".to_vec())),
            ..Default::default()
        };
        assert!(ca_bundle_valid(&cc).is_err());
        assert!(ca_bundle_valid(&WebhookClientConfig::default()).is_err());
    }
}
