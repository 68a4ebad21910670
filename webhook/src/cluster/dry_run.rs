//! [`PodDryRun`] against the API server: the dry-run Pod create of a CloneSet template.

use serde_json::Value;

use super::ApiCluster;
use crate::cloneset::template::{DryRun, PodDryRun};

impl PodDryRun for ApiCluster {
    async fn dry_run_create(&self, namespace: &str, pod: &Value) -> DryRun {
        if !self.template_dry_run {
            return DryRun::Disabled;
        }
        let Some(client) = &self.client else {
            return DryRun::Unavailable("the webhook has no Kubernetes client".to_owned());
        };
        let pp = kube::api::PostParams {
            dry_run: true,
            field_manager: None,
        };
        let request = serde_json::to_vec(pod)
            .map_err(|e| e.to_string())
            .and_then(|body| {
                kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/pods"))
                    .create(&pp, body)
                    .map_err(|e| e.to_string())
            });
        let request = match request {
            Ok(r) => r,
            Err(e) => return DryRun::Unavailable(format!("building the request: {e}")),
        };
        // The answer is the whole defaulted Pod; only success or the Status matters.
        match tokio::time::timeout(self.timeout, client.request_text(request)).await {
            Ok(Ok(_)) => DryRun::Accepted,
            Ok(Err(kube::Error::Api(status))) => DryRun::Refused(status),
            Ok(Err(e)) => DryRun::Unavailable(e.to_string()),
            Err(_) => DryRun::Unavailable(format!("no answer within {:?}", self.timeout)),
        }
    }
}
