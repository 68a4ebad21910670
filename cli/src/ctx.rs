//! Connecting to the cluster and finding out which API versions it serves.

use crate::error::{CliError, Result, kube_err};
use crate::target::Target;
use crate::view::RolloutView;
use crate::view::workload::Kind;
use kruise_api::keys;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::{self, ApiResource};
use kube::{Client, Config};
use serde_json::Value;
use std::path::PathBuf;

/// Connection flags shared by every command.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConnectArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// Namespace (default: the namespace of the kubeconfig context).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
}

#[derive(Clone)]
pub struct Ctx {
    pub client: Client,
    pub namespace: String,
}

impl Ctx {
    pub async fn connect(args: &ConnectArgs) -> Result<Self> {
        let options = KubeConfigOptions {
            context: args.context.clone(),
            ..Default::default()
        };
        // Without --kubeconfig, kube reads $KUBECONFIG (several files allowed) like kubectl.
        let config = match &args.kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path).map_err(|e| {
                    CliError::Kubeconfig(format!("cannot read {}: {e}", path.display()))
                })?;
                Config::from_custom_kubeconfig(kc, &options)
                    .await
                    .map_err(|e| CliError::Kubeconfig(e.to_string()))?
            }
            None if args.context.is_some() => Config::from_kubeconfig(&options)
                .await
                .map_err(|e| CliError::Kubeconfig(e.to_string()))?,
            None => Config::infer()
                .await
                .map_err(|e| CliError::Kubeconfig(e.to_string()))?,
        };
        let namespace = args
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = Client::try_from(config).map_err(|e| CliError::Unreachable(e.to_string()))?;
        Ok(Ctx { client, namespace })
    }

    /// Finds the version of `group/plural` to use: the group's preferred version when it serves
    /// the resource, otherwise any version that does. Returns every serving version too.
    pub async fn resolve(&self, group: &str, plural: &str) -> Result<(ApiResource, Vec<String>)> {
        let not_installed = || CliError::NotInstalled {
            resource: plural.to_string(),
            group: group.to_string(),
        };
        let api_group = match discovery::group(&self.client, group).await {
            Ok(g) => g,
            Err(kube::Error::Api(s)) if s.code == 404 => return Err(not_installed()),
            Err(kube::Error::Discovery(_)) => return Err(not_installed()),
            Err(e) => return Err(kube_err(e)),
        };
        let mut serving = Vec::new();
        let mut chosen: Option<ApiResource> = None;
        // KUBECTL_KRUISE_API_VERSION pins a version (e.g. v1alpha1) to exercise version skew.
        let preferred = std::env::var("KUBECTL_KRUISE_API_VERSION")
            .ok()
            .filter(|v| !v.is_empty())
            .or_else(|| api_group.preferred_version().map(str::to_string));
        for version in api_group.versions() {
            if let Some((ar, _)) = api_group
                .versioned_resources(version)
                .into_iter()
                .find(|(ar, _)| ar.plural == plural)
            {
                serving.push(version.to_string());
                if chosen.is_none() || preferred.as_deref() == Some(version) {
                    chosen = Some(ar);
                }
            }
        }
        tracing::debug!(group, plural, ?serving, "discovered served versions");
        chosen.map(|ar| (ar, serving)).ok_or_else(not_installed)
    }

    pub async fn workload_api(
        &self,
        kind: Kind,
        namespace: &str,
    ) -> Result<(Api<DynamicObject>, ApiResource)> {
        let spec = kind.spec();
        let (ar, _) = self.resolve(spec.group, spec.plural).await?;
        let api = if spec.namespaced {
            Api::namespaced_with(self.client.clone(), namespace, &ar)
        } else {
            Api::all_with(self.client.clone(), &ar)
        };
        Ok((api, ar))
    }

    pub async fn kruise_api(
        &self,
        plural: &str,
        namespace: Option<&str>,
    ) -> Result<(Api<DynamicObject>, ApiResource)> {
        let (ar, _) = self.resolve(keys::APPS_GROUP, plural).await?;
        let api = match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        };
        Ok((api, ar))
    }
}

/// A workload located on the cluster, with the API handle used to read and patch it.
#[derive(Clone)]
pub struct Workload {
    pub api: Api<DynamicObject>,
    pub resource: ApiResource,
    pub target: Target,
    /// The namespace of the command; a cluster-scoped kind (SidecarSet) is not in it.
    pub namespace: String,
}

impl Workload {
    pub async fn locate(ctx: &Ctx, target: &Target) -> Result<Self> {
        let (api, resource) = ctx.workload_api(target.kind, &ctx.namespace).await?;
        Ok(Workload {
            api,
            resource,
            target: target.clone(),
            namespace: ctx.namespace.clone(),
        })
    }

    /// The API for the workload's Pods: its namespace, or every namespace for a cluster-scoped
    /// kind whose selector reaches across them.
    pub fn pods_api(&self, client: &Client) -> Api<k8s_openapi::api::core::v1::Pod> {
        match self.target.kind.spec().pods {
            crate::view::workload::PodSource::SelectedClusterWide => Api::all(client.clone()),
            _ => Api::namespaced(client.clone(), &self.namespace),
        }
    }

    pub fn not_found(&self, e: kube::Error) -> CliError {
        CliError::from_kube(
            e,
            Some((
                self.target.kind.as_str(),
                &self.target.name,
                &self.namespace,
            )),
        )
    }

    pub async fn fetch_raw(&self) -> Result<Value> {
        let obj = self
            .api
            .get(&self.target.name)
            .await
            .map_err(|e| self.not_found(e))?;
        Ok(typed_json(&obj, &self.resource))
    }

    pub async fn view(&self) -> Result<RolloutView> {
        Ok(RolloutView::from_json(&self.fetch_raw().await?))
    }

    pub async fn merge_patch(&self, patch: &Value) -> Result<RolloutView> {
        tracing::debug!(target = %self.target, %patch, "merge patch");
        let obj = self
            .api
            .patch(
                &self.target.name,
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
            .map_err(|e| self.not_found(e))?;
        Ok(RolloutView::from_json(&typed_json(&obj, &self.resource)))
    }

    /// Applies a JSON patch (RFC 6902) given as its array of operations; a failed `test`
    /// operation leaves the workload as it was.
    pub async fn json_patch(&self, ops: Value) -> Result<()> {
        tracing::debug!(target = %self.target, %ops, "JSON patch");
        let patch: json_patch::Patch =
            serde_json::from_value(ops).map_err(|e| CliError::Other(e.into()))?;
        self.api
            .patch(
                &self.target.name,
                &PatchParams::default(),
                &Patch::<Value>::Json(patch),
            )
            .await
            .map_err(|e| self.not_found(e))?;
        Ok(())
    }
}

/// The object as JSON with `apiVersion` and `kind` filled in: list and watch responses leave
/// them off their items, and the view needs them to know which layout it reads.
pub fn typed_json(obj: &DynamicObject, ar: &ApiResource) -> Value {
    let mut v = serde_json::to_value(obj).unwrap_or(Value::Null);
    if let Some(m) = v.as_object_mut() {
        for (k, val) in [("apiVersion", &ar.api_version), ("kind", &ar.kind)] {
            if m.get(k).and_then(Value::as_str).is_none_or(str::is_empty) {
                m.insert(k.to_string(), Value::from(val.as_str()));
            }
        }
    }
    v
}
