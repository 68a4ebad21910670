//! Applying and deleting the embedded objects, and telling which Kruise a cluster runs.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_api::keys;
use kube::api::{
    Api, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::discovery::{self, ApiCapabilities, ApiResource, Scope};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::{DAEMON_DAEMONSET, FIELD_MANAGER, MANAGER_DEPLOYMENT, PART_OF_LABEL, PART_OF_VALUE};
use crate::error::{CliError, Result, kube_err};

/// The API of one object's kind (discovered), scoped to its namespace when it has one.
async fn api_for(client: &Client, obj: &Value) -> Result<(Api<DynamicObject>, ApiResource)> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, super::kind(obj));
    let (ar, caps): (ApiResource, ApiCapabilities) = discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| {
            CliError::Failed(format!(
                "the cluster does not serve {} {api_version}: {e} (is the Kubernetes version at least 1.30?)",
                super::kind(obj)
            ))
        })?;
    let api = match (caps.scope, obj["metadata"]["namespace"].as_str()) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    };
    Ok((api, ar))
}

fn dynamic(obj: &Value) -> Result<DynamicObject> {
    serde_json::from_value(obj.clone())
        .map_err(|e| CliError::Failed(format!("embedded {} is malformed: {e}", super::name(obj))))
}

/// Creates or updates one object: server-side apply, except CRDs, which are replaced whole.
///
/// A CRD left by dev mode points conversion at a URL on a host; an apply naming the in-cluster
/// Service would merge both into a config the API server refuses ("exactly one of url or
/// service"), hence the replace (as `hack/install.sh` does).
pub async fn apply(client: &Client, obj: &Value, dry_run: bool) -> Result<()> {
    let (api, _) = api_for(client, obj).await?;
    let name = super::name(obj);
    let mut dynobj = dynamic(obj)?;
    if super::kind(obj) == "CustomResourceDefinition" {
        let pp = PostParams {
            dry_run,
            field_manager: Some(FIELD_MANAGER.to_owned()),
        };
        match api.get_opt(name).await.map_err(kube_err)? {
            Some(current) => {
                dynobj.metadata.resource_version = current.metadata.resource_version;
                api.replace(name, &pp, &dynobj).await.map_err(kube_err)?;
            }
            None => {
                api.create(&pp, &dynobj).await.map_err(kube_err)?;
            }
        }
        return Ok(());
    }
    let mut pp = PatchParams::apply(FIELD_MANAGER).force();
    pp.dry_run = dry_run;
    api.patch(name, &pp, &Patch::Apply(&dynobj))
        .await
        .map_err(kube_err)?;
    Ok(())
}

/// Deletes one object (foreground, so a namespace's or workload's dependents go with it);
/// true when it existed.
pub async fn delete(client: &Client, obj: &Value) -> Result<bool> {
    let (api, _) = match api_for(client, obj).await {
        Ok(a) => a,
        // A kind the cluster does not serve has no objects to delete.
        Err(_) => return Ok(false),
    };
    match api
        .delete(super::name(obj), &DeleteParams::foreground())
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(kube_err(e)),
    }
}

/// Waits until the object is gone.
pub async fn wait_gone(client: &Client, obj: &Value, timeout: Duration) -> Result<()> {
    let Ok((api, _)) = api_for(client, obj).await else {
        return Ok(());
    };
    let start = Instant::now();
    loop {
        if api
            .get_opt(super::name(obj))
            .await
            .map_err(kube_err)?
            .is_none()
        {
            return Ok(());
        }
        if start.elapsed() > timeout {
            return Err(CliError::Timeout(format!(
                "{} {} still exists after {}s (a finalizer may be waiting: kubectl get {} {} -o yaml)",
                super::kind(obj),
                super::name(obj),
                timeout.as_secs(),
                super::kind(obj).to_lowercase(),
                super::name(obj)
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Deletes both webhook configurations; how many existed.
pub async fn delete_webhook_configurations(client: &Client) -> Result<usize> {
    let mut n = 0;
    let dp = DeleteParams::default();
    let m: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    match m
        .delete(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME, &dp)
        .await
    {
        Ok(_) => n += 1,
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(kube_err(e)),
    }
    let v: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    match v
        .delete(keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME, &dp)
        .await
    {
        Ok(_) => n += 1,
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(kube_err(e)),
    }
    Ok(n)
}

/// The Kruise CRDs whose conversion webhook is a URL under `base` (dev mode's host URL): once dev
/// mode stops, the API server cannot convert them, so a request for their other version fails.
pub async fn crds_converting_at(client: &Client, base: &str) -> Result<Vec<String>> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crds = api
        .list(&kube::api::ListParams::default())
        .await
        .map_err(kube_err)?;
    Ok(crds
        .into_iter()
        .filter(|crd| {
            crd.spec
                .conversion
                .as_ref()
                .filter(|c| c.strategy == "Webhook")
                .and_then(|c| c.webhook.as_ref())
                .and_then(|w| w.client_config.as_ref())
                .and_then(|c| c.url.as_deref())
                .is_some_and(|u| u.starts_with(base))
        })
        .map(|crd| crd.name_any())
        .collect())
}

/// Waits until every CRD among `crds` is Established.
pub async fn wait_established(client: &Client, crds: &[&Value], timeout: Duration) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let start = Instant::now();
    for crd in crds {
        loop {
            let current = api.get_opt(super::name(crd)).await.map_err(kube_err)?;
            let established = current
                .and_then(|c| c.status)
                .and_then(|s| s.conditions)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
            if established {
                break;
            }
            if start.elapsed() > timeout {
                return Err(CliError::Timeout(format!(
                    "CRD {} is not Established after {}s (kubectl describe crd {})",
                    super::name(crd),
                    timeout.as_secs(),
                    super::name(crd)
                )));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    Ok(())
}

/// Which Kruise runs in the cluster, from the manager Deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flavor {
    /// This project.
    KruiseRs,
    /// Upstream OpenKruise (its chart's images `openkruise/kruise-manager`).
    OpenKruise,
}

impl std::fmt::Display for Flavor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Flavor::KruiseRs => "Kruise-rs",
            Flavor::OpenKruise => "OpenKruise",
        })
    }
}

/// An in-cluster manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub flavor: Flavor,
    /// From the version label, else the image tag (`unknown` for a digest-only image).
    pub version: String,
    /// `namespace/name` of the Deployment.
    pub deployment: String,
    pub image: String,
    /// Replicas ready.
    pub ready: i32,
    /// The manager container's `--feature-gates` value (occurrences joined, as the flag
    /// merges them); `None` without the flag.
    pub feature_gates: Option<String>,
}

/// The `--feature-gates` value in `args` (`--feature-gates=V` or `--feature-gates V`); several
/// occurrences are joined with `,` since each one adds to the previous ones, later entries
/// winning.
pub fn feature_gates_arg(args: &[String]) -> Option<String> {
    let flag = kruise_api::features::FLAG;
    let mut found: Vec<&str> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == flag {
            if let Some(v) = it.next() {
                found.push(v);
            }
        } else if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            found.push(v);
        }
    }
    (!found.is_empty()).then(|| found.join(","))
}

/// Tells the flavor and version of a manager Deployment.
pub fn describe(d: &Deployment) -> Installed {
    let container = d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.first());
    let image = container.and_then(|c| c.image.clone()).unwrap_or_default();
    let feature_gates = container
        .and_then(|c| c.args.as_deref())
        .and_then(feature_gates_arg);
    let labels = d.labels();
    let ours = labels
        .get(PART_OF_LABEL)
        .is_some_and(|v| v == PART_OF_VALUE)
        || image.contains("kruise-rs/");
    let flavor = if ours {
        Flavor::KruiseRs
    } else {
        Flavor::OpenKruise
    };
    let version = labels
        .get(super::VERSION_LABEL)
        .cloned()
        .or_else(|| image_tag(&image).map(|t| t.trim_start_matches('v').to_owned()))
        .unwrap_or_else(|| "unknown".to_owned());
    Installed {
        flavor,
        version,
        deployment: format!("{}/{}", d.namespace().unwrap_or_default(), d.name_any()),
        image,
        ready: d
            .status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0),
        feature_gates,
    }
}

/// The tag of an image reference (`None` for a digest-only or untagged one).
pub fn image_tag(image: &str) -> Option<&str> {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    last.split_once(':').map(|(_, t)| t)
}

/// The in-cluster manager, if there is one.
pub async fn installed(client: &Client) -> Result<Option<Installed>> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), keys::KRUISE_NAMESPACE);
    Ok(api
        .get_opt(MANAGER_DEPLOYMENT)
        .await
        .map_err(kube_err)?
        .as_ref()
        .map(describe))
}

/// The daemon DaemonSet, if there is one.
pub async fn daemonset(client: &Client) -> Result<Option<DaemonSet>> {
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), keys::KRUISE_NAMESPACE);
    api.get_opt(DAEMON_DAEMONSET).await.map_err(kube_err)
}

/// Where the mutating webhook configuration sends Pods: `Some(url)` in dev mode,
/// `Some("service ns/name")` in cluster; `None` without the configuration.
pub async fn webhook_target(client: &Client) -> Result<Option<String>> {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let Some(m) = api
        .get_opt(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .map_err(kube_err)?
    else {
        return Ok(None);
    };
    let cc = m
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .next()
        .map(|w| w.client_config);
    Ok(Some(match cc {
        Some(c) => match (c.url, c.service) {
            (Some(u), _) => u,
            (None, Some(s)) => format!("service {}/{}", s.namespace, s.name),
            (None, None) => "nowhere".to_owned(),
        },
        None => "nowhere (no webhooks)".to_owned(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_tags() {
        assert_eq!(
            image_tag("openkruise/kruise-manager:v1.8.0"),
            Some("v1.8.0")
        );
        assert_eq!(
            image_tag("127.0.0.1:5000/kruise-rs/kruise-manager:dev"),
            Some("dev")
        );
        assert_eq!(
            image_tag("127.0.0.1:5000/kruise-rs/kruise-manager@sha256:ab"),
            None
        );
    }

    #[test]
    fn openkruise_is_told_from_ours() {
        let d: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "kruise-controller-manager", "namespace": "kruise-system"},
            "spec": {"selector": {}, "template": {"spec": {"containers": [
                {"name": "manager", "image": "openkruise/kruise-manager:v1.8.2"}]}}},
            "status": {"readyReplicas": 2}
        }))
        .expect("deployment");
        let i = describe(&d);
        assert_eq!(i.flavor, Flavor::OpenKruise);
        assert_eq!(i.version, "1.8.2");
        assert_eq!(i.ready, 2);
        assert_eq!(i.deployment, "kruise-system/kruise-controller-manager");
    }

    #[test]
    fn feature_gates_arg_reads_both_forms_and_merges_occurrences() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(feature_gates_arg(&args(&["--log-json"])), None);
        assert_eq!(
            feature_gates_arg(&args(&["--feature-gates=A=true", "--x"])).as_deref(),
            Some("A=true")
        );
        assert_eq!(
            feature_gates_arg(&args(&[
                "--feature-gates",
                "A=true",
                "--feature-gates=B=false"
            ]))
            .as_deref(),
            Some("A=true,B=false")
        );
    }
}
