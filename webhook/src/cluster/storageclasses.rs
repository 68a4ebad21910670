//! [`StorageClassLookup`] against the API server: one read per resized claim template.

use k8s_openapi::api::storage::v1::StorageClass;
use kruise_api::keys;

use super::ApiCluster;
use crate::statefulset::claims::StorageClassLookup;

impl StorageClassLookup for ApiCluster {
    async fn storage_class(&self, name: Option<&str>) -> Result<Option<StorageClass>, String> {
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| "the webhook has no Kubernetes client".to_owned())?;
        let api: kube::Api<StorageClass> = kube::Api::all(client.clone());
        let late = |_| format!("no answer from the API server within {:?}", self.timeout);
        match name {
            Some(n) => tokio::time::timeout(self.timeout, api.get_opt(n))
                .await
                .map_err(late)?
                .map_err(|e| e.to_string()),
            // The default class: the newest of those annotated default, as upstream picks it.
            None => {
                let list = tokio::time::timeout(self.timeout, api.list(&Default::default()))
                    .await
                    .map_err(late)?
                    .map_err(|e| e.to_string())?;
                Ok(list
                    .items
                    .into_iter()
                    .filter(|sc| {
                        sc.metadata
                            .annotations
                            .as_ref()
                            .and_then(|a| a.get(keys::DEFAULT_STORAGE_CLASS_ANNOTATION))
                            .is_some_and(|v| v == "true")
                    })
                    .max_by(|a, b| {
                        let t =
                            |s: &StorageClass| s.metadata.creation_timestamp.as_ref().map(|t| t.0);
                        t(a).cmp(&t(b))
                    }))
            }
        }
    }
}
