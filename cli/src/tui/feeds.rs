//! The watch caches behind the live view, and the Pod views built from them (cached by
//! resourceVersion). The model turns the cached Events into its own rows.

use crate::view::PodView;
use crate::watch::Cache;
use k8s_openapi::api::core::v1::{Event as K8sEvent, Pod};
use kube::api::{ApiResource, DynamicObject};
use std::collections::HashMap;

/// The three watched collections, the workload they are about, and the Pod-view cache.
#[derive(Clone)]
pub struct Feeds {
    /// The workload's name: picks its object out of the object watch and its Events.
    pub name: String,
    /// Fills in `apiVersion`/`kind`, which watch items leave off; None in tests and benches.
    pub resource: Option<ApiResource>,
    pub objects: Cache<DynamicObject>,
    pub pods: Cache<Pod>,
    pub events: Cache<K8sEvent>,
    pub views: ViewCache,
    /// Clock ticks seen, for refreshes coarser than one tick.
    pub ticks: u64,
}

impl std::fmt::Debug for Feeds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feeds")
            .field("name", &self.name)
            .field("objects", &self.objects.items.len())
            .field("pods", &self.pods.items.len())
            .field("events", &self.events.items.len())
            .field("ticks", &self.ticks)
            .finish()
    }
}

impl Default for Feeds {
    fn default() -> Self {
        Feeds {
            name: String::new(),
            resource: None,
            objects: Cache::default(),
            // A cluster-scoped SidecarSet watches Pods of every namespace.
            pods: Cache::across_namespaces(),
            events: Cache::default(),
            views: ViewCache::default(),
            ticks: 0,
        }
    }
}

impl Feeds {
    /// The watched workload as JSON with `apiVersion`/`kind` set, or None once deleted.
    pub fn object_json(&self) -> Option<serde_json::Value> {
        let obj = self.objects.items.get(&self.name)?;
        Some(match &self.resource {
            Some(ar) => crate::ctx::typed_json(obj, ar),
            None => serde_json::to_value(obj).unwrap_or(serde_json::Value::Null),
        })
    }

    /// Views of the Pods owned by `owner_uid` (every Pod when None).
    pub fn pod_views(&mut self, owner_uid: Option<&str>) -> Vec<PodView> {
        let views = &mut self.views;
        let out = crate::watch::owned(&self.pods, owner_uid)
            .map(|p| views.get(p))
            .collect();
        // Forget pods that are gone once the cache has grown well past the live set.
        if views.views.len() > self.pods.items.len() * 2 + 64 {
            views.views.retain(|n, _| self.pods.items.contains_key(n));
        }
        out
    }
}

/// Pod views keyed by name and resourceVersion, so a change to one pod among thousands does not
/// re-parse every pod's annotations.
#[derive(Default, Clone)]
pub struct ViewCache {
    pub views: HashMap<String, (String, PodView)>,
}

impl ViewCache {
    pub fn get(&mut self, pod: &Pod) -> PodView {
        // The pod cache's key: names repeat across namespaces.
        let name = crate::watch::namespaced_key(&pod.metadata);
        let rv = pod.metadata.resource_version.clone().unwrap_or_default();
        match self.views.get(&name) {
            Some((cached_rv, v)) if *cached_rv == rv && !rv.is_empty() => v.clone(),
            _ => {
                let v = PodView::from_pod(pod);
                self.views.insert(name, (rv, v.clone()));
                v
            }
        }
    }
}
