//! What a reconcile of a UnitedDeployment needs: the client, the shared Pod cache, Events.

use std::sync::Arc;

use crate::events::Recorder;
use k8s_openapi::api::core::v1::ObjectReference;
use kruise_api::apps::v1alpha1::SubsetKind;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::events::{EventType, Reporter};
use kube::{Api, Client};

use crate::expectations::ResourceVersionExpectations;
use crate::metrics::Metrics;
use crate::podcache::PodCache;

/// Name in Events and logs (upstream's).
pub const CONTROLLER_NAME: &str = "uniteddeployment-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "uniteddeployment";

/// Shared state of the UnitedDeployment controller.
pub struct Context {
    pub client: Client,
    pub pods: PodCache,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    /// Only objects in this namespace (all when `None`).
    pub namespace: Option<String>,
    /// The resourceVersion of our last status write per UnitedDeployment, until the cache
    /// shows it.
    pub written: ResourceVersionExpectations,
}

impl Context {
    pub fn new(
        client: Client,
        pods: PodCache,
        metrics: Arc<Metrics>,
        instance: Option<String>,
        namespace: Option<String>,
    ) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER_NAME.to_owned(),
            instance,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            pods,
            metrics,
            namespace,
            written: ResourceVersionExpectations::new(),
        }
    }

    /// The API of one subset workload kind, in namespace `ns` or all.
    pub fn subset_api(&self, kind: SubsetKind, ns: Option<&str>) -> Api<DynamicObject> {
        let (group, version, kind_name, plural) = kind.gvk();
        let gvk = GroupVersionKind::gvk(group, version, kind_name);
        let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
        match ns {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        }
    }

    /// Records an Event; a failure to record is logged, never fatal.
    pub async fn event(
        &self,
        about: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let ev = crate::events::event(type_, reason, note, None);
        crate::events::publish_event(&self.recorder, &ev, about).await;
    }
}
