//! [`SidecarSetLookup`] against the API server: SidecarSets (from the watch cache once it has
//! loaded), the ControllerRevision an injection pins, the `kruise-configuration` ConfigMap
//! (the patchPodMetadata whitelist), and namespace labels.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kruise_api::apps::v1beta1::{SidecarSet, SidecarSetInjectRevision};
use kruise_api::keys;

use super::ApiCluster;
use crate::sidecarset::{SidecarSetLookup, revision};

impl SidecarSetLookup for ApiCluster {
    fn sidecar_set_changing(&self) {
        if let Some(c) = &self.sidecar_sets {
            c.changing();
        }
    }

    async fn sidecar_sets(&self) -> Result<Vec<Arc<SidecarSet>>, String> {
        if let Some(sets) = self.sidecar_sets.as_ref().and_then(|c| c.snapshot()) {
            return Ok(sets);
        }
        let Some(client) = &self.client else {
            return Ok(Vec::new());
        };
        let api: kube::Api<SidecarSet> = kube::Api::all(client.clone());
        match tokio::time::timeout(self.timeout, api.list(&Default::default())).await {
            Ok(Ok(list)) => Ok(list.items.into_iter().map(Arc::new).collect()),
            // The CRD may not be installed (yet): nothing to inject.
            Ok(Err(kube::Error::Api(e))) if e.code == 404 => Ok(Vec::new()),
            Ok(Err(e)) => Err(format!("cannot list SidecarSets: {e}")),
            Err(_) => Err(format!(
                "cannot list SidecarSets: no answer from the API server within {:?}",
                self.timeout
            )),
        }
    }

    async fn injection_revision(
        &self,
        set: &SidecarSet,
        rev: &SidecarSetInjectRevision,
    ) -> Result<Option<ControllerRevision>, String> {
        let Some(client) = &self.client else {
            return Ok(None);
        };
        let ns = revision::revisions_namespace();
        let api: kube::Api<ControllerRevision> = kube::Api::namespaced(client.clone(), &ns);
        let name = set.metadata.name.clone().unwrap_or_default();
        let fail = |e: String| format!("cannot read the revision SidecarSet {name} injects: {e}");
        if let Some(r) = &rev.revision_name {
            return match tokio::time::timeout(self.timeout, api.get_opt(r)).await {
                Ok(res) => res.map_err(|e| fail(e.to_string())),
                Err(_) => Err(fail(format!("no answer within {:?}", self.timeout))),
            };
        }
        let Some(v) = &rev.custom_version else {
            return Ok(None);
        };
        let lp = kube::api::ListParams::default().labels(&format!(
            "{}={name},{}={v}",
            keys::SIDECARSET_NAME_LABEL,
            keys::SIDECARSET_CUSTOM_VERSION_LABEL
        ));
        match tokio::time::timeout(self.timeout, api.list(&lp)).await {
            Ok(Ok(list)) => Ok(list.items.into_iter().max_by(|a, b| {
                a.revision
                    .cmp(&b.revision)
                    .then_with(|| a.metadata.name.cmp(&b.metadata.name))
            })),
            Ok(Err(e)) => Err(fail(e.to_string())),
            Err(_) => Err(fail(format!("no answer within {:?}", self.timeout))),
        }
    }

    async fn kruise_configuration(&self) -> Result<BTreeMap<String, String>, String> {
        let Some(client) = &self.client else {
            return Ok(BTreeMap::new());
        };
        let ns = revision::revisions_namespace();
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), &ns);
        let name = keys::KRUISE_CONFIGURATION_CONFIGMAP;
        match tokio::time::timeout(self.timeout, api.get_opt(name)).await {
            Ok(Ok(cm)) => Ok(cm.and_then(|c| c.data).unwrap_or_default()),
            Ok(Err(e)) => Err(format!("cannot read ConfigMap {ns}/{name}: {e}")),
            Err(_) => Err(format!(
                "cannot read ConfigMap {ns}/{name}: no answer within {:?}",
                self.timeout
            )),
        }
    }

    async fn namespace_labels(&self, namespace: &str) -> Result<BTreeMap<String, String>, String> {
        let Some(client) = &self.client else {
            return Ok(BTreeMap::new());
        };
        let api: kube::Api<Namespace> = kube::Api::all(client.clone());
        match tokio::time::timeout(self.timeout, api.get_opt(namespace)).await {
            Ok(Ok(ns)) => Ok(ns.and_then(|n| n.metadata.labels).unwrap_or_default()),
            Ok(Err(e)) => Err(format!("cannot read namespace {namespace}: {e}")),
            Err(_) => Err(format!(
                "cannot read namespace {namespace}: no answer within {:?}",
                self.timeout
            )),
        }
    }
}
