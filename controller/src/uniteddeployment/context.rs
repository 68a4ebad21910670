//! What a reconcile of a UnitedDeployment needs: the client, the shared Pod cache, Events.

use kruise_api::apps::v1alpha1::SubsetKind;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

use crate::expectations::ResourceVersionExpectations;
use crate::registry::{Base, Shared};

/// Name in Events and logs (upstream's).
pub const CONTROLLER_NAME: &str = "uniteddeployment-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "uniteddeployment";

/// Shared state of the UnitedDeployment controller.
pub struct Context {
    base: Base,
    /// The resourceVersion of our last status write per UnitedDeployment, until the cache
    /// shows it.
    pub written: ResourceVersionExpectations,
}

crate::deref_base!(Context);

impl Context {
    pub fn new(shared: &Shared) -> Self {
        Self {
            base: shared.base(CONTROLLER_NAME),
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
}
