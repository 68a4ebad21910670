//! One watch of a kind kept as a store, shared by the controllers that read it (upstream reads
//! these kinds from its informer cache). [`start`] runs the watch until shutdown and says when
//! its first list is in.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::selector;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A started watch: its store, and whether its first list has been loaded.
#[derive(Clone)]
pub struct Watched<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    synced: watch::Receiver<bool>,
}

impl<K: Resource + Clone + 'static> Watched<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    /// Everything the watch holds now.
    pub fn state(&self) -> Vec<Arc<K>> {
        self.store.state()
    }

    /// Waits until the first list has been loaded: before that, the store looks empty.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.clone();
        let _ = rx.wait_for(|s| *s).await;
    }
}

/// Starts watching `K` in `namespace` (all namespaces when `None`) into a store, until
/// `shutdown`; `what` names the kind in logs. managedFields are dropped: no controller reads
/// them, and they are most of a small object's size.
pub fn start<K>(
    client: Client,
    namespace: Option<&str>,
    what: &'static str,
    shutdown: CancellationToken,
) -> Watched<K>
where
    K: Resource<Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let api: Api<K> = match namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let (store, writer) = reflector::store::<K>();
    let (synced_tx, synced) = watch::channel(false);
    tokio::spawn(async move {
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(|o| o.managed_fields_mut().clear())
            .reflect(writer);
        let mut stream = std::pin::pin!(stream);
        loop {
            let item = tokio::select! {
                _ = shutdown.cancelled() => break,
                item = stream.next() => item,
            };
            match item {
                None => break,
                Some(Ok(watcher::Event::InitDone)) => {
                    let _ = synced_tx.send(true);
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => tracing::warn!(kind = what, error = %e, "watch failed, retrying"),
            }
        }
        tracing::debug!(kind = what, "watch cache stopped");
    });
    Watched { store, synced }
}

/// The objects of `all` in `namespace` that `sel` selects and whose controller is `uid`: what a
/// workload owns of a watched kind.
pub fn owned<'a, K: Resource>(
    all: &'a [Arc<K>],
    namespace: &'a str,
    sel: &'a LabelSelector,
    uid: &'a str,
) -> impl Iterator<Item = &'a Arc<K>> + 'a {
    all.iter().filter(move |o| {
        let m = o.meta();
        m.namespace.as_deref() == Some(namespace)
            && m.owner_references
                .iter()
                .flatten()
                .any(|r| r.controller == Some(true) && r.uid == uid)
            && m.labels.as_ref().map_or_else(
                || selector::matches(sel, &Default::default()),
                |l| selector::matches(sel, l),
            )
    })
}

/// Test objects' metadata: namespace, name, label `app`, and one owner (`uid`, controller or
/// not).
#[cfg(test)]
pub(crate) fn test_meta(
    ns: &str,
    name: &str,
    owner: &str,
    controller: bool,
    app: &str,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    ObjectMeta {
        namespace: Some(ns.into()),
        name: Some(name.into()),
        labels: Some([("app".to_string(), app.to_string())].into()),
        owner_references: Some(vec![OwnerReference {
            uid: owner.into(),
            controller: Some(controller),
            ..Default::default()
        }]),
        ..Default::default()
    }
}
