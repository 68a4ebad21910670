//! What an ImagePullJob reconcile needs: the client, the Pod cache, the NodeImage store and the
//! expectations of our own NodeImage writes.

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::NodeImage;
use kube::Client;
use kube::runtime::reflector;
use std::sync::Arc;

use crate::expectations::ResourceVersionExpectations;
use crate::podcache::PodCache;

/// The ImagePullJob controller's name in metrics and logs.
pub(super) const METRIC_NAME: &str = "imagepulljob";

/// Shared state of the ImagePullJob controller.
pub struct Context {
    pub client: Client,
    pub pods: PodCache,
    pub node_images: reflector::Store<NodeImage>,
    /// NodeImages we wrote and the cache has not shown yet.
    pub rv_exp: ResourceVersionExpectations,
    /// Extra TTL of `Always` jobs' tags (upstream flag default-ttlseconds-for-always-nodeimage).
    pub extra_ttl_for_always: i32,
}

/// The Pods bound to `node`.
pub(super) fn pods_on_node(pods: &PodCache, node: &str) -> Vec<Arc<Pod>> {
    pods.store()
        .state()
        .into_iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .collect()
}
