//! Watch plumbing shared by `rollout status` and the live view: one watch on the workload object,
//! one on its Pods, merged into a single stream of changes. Nothing here polls.

use crate::error::{CliError, kube_err};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Event as K8sEvent, Pod};
use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use std::collections::BTreeMap;
use std::pin::Pin;

pub enum Update {
    // Boxed: the payloads differ a lot in size and the stream moves them around.
    Object(Box<watcher::Event<DynamicObject>>),
    Pod(Box<watcher::Event<Pod>>),
    Event(Box<watcher::Event<K8sEvent>>),
}

pub type UpdateStream = Pin<Box<dyn Stream<Item = Result<Update, CliError>> + Send>>;

fn lift<K, F>(
    s: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    f: F,
) -> UpdateStream
where
    K: Send + 'static,
    F: Fn(watcher::Event<K>) -> Update + Send + 'static,
{
    s.filter_map(move |r| {
        let item = match r {
            Ok(ev) => Some(Ok(f(ev))),
            Err(e) if expired(&e) => None,
            Err(watcher::Error::InitialListFailed(e))
            | Err(watcher::Error::WatchStartFailed(e)) => Some(Err(kube_err(e))),
            Err(e) => Some(Err(CliError::Api(e.to_string()))),
        };
        std::future::ready(item)
    })
    .boxed()
}

/// Whether a watch error is the apiserver saying our resourceVersion expired (410 Gone). The
/// watcher re-lists by itself, so this is routine: logged at debug, never shown to the user
/// (a WARN line would break "failures print one line on stderr").
pub fn expired(e: &watcher::Error) -> bool {
    let gone = matches!(e, watcher::Error::WatchError(s) if s.code == 410);
    if gone {
        tracing::debug!(error = %e, "watch resourceVersion expired; re-listing");
    }
    gone
}

/// Streams changes of the named object and of the Pods its selector matches; `events` adds the
/// namespace's Events (the live view shows them).
pub fn stream(
    object_api: Api<DynamicObject>,
    name: &str,
    pods_api: Api<Pod>,
    selector: &str,
    events_api: Option<Api<K8sEvent>>,
) -> UpdateStream {
    let obj = watcher(
        object_api,
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .default_backoff();
    let pods = watcher(pods_api, watcher::Config::default().labels(selector)).default_backoff();
    let mut merged = futures::stream::select(
        lift(obj, |e| Update::Object(Box::new(e))),
        lift(pods, |e| Update::Pod(Box::new(e))),
    )
    .boxed();
    if let Some(ev_api) = events_api {
        let evs = watcher(ev_api, watcher::Config::default()).default_backoff();
        merged = futures::stream::select(merged, lift(evs, |e| Update::Event(Box::new(e)))).boxed();
    }
    merged
}

/// Whether a watch error should stop the command rather than be retried.
pub fn is_fatal(e: &CliError) -> bool {
    matches!(
        e,
        CliError::Forbidden { .. } | CliError::Unauthorized(_) | CliError::NotInstalled { .. }
    )
}

/// A keyed cache fed by watcher events, swapping in the new list atomically after a re-list so a
/// reconnect never shows a half-empty state. Keyed by name, or by [`namespaced_key`] when made
/// with [`Cache::across_namespaces`].
#[derive(Clone)]
pub struct Cache<K> {
    pub items: BTreeMap<String, K>,
    pending: Option<BTreeMap<String, K>>,
    across_namespaces: bool,
}

impl<K> Default for Cache<K> {
    fn default() -> Self {
        Cache {
            items: BTreeMap::new(),
            pending: None,
            across_namespaces: false,
        }
    }
}

/// `namespace/name` (just `name` for cluster-scoped objects).
pub fn namespaced_key(meta: &kube::api::ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

impl<K> Cache<K> {
    /// A cache for a watch over several namespaces (a SidecarSet's Pods), where names alone
    /// collide: keyed by `namespace/name`.
    pub fn across_namespaces() -> Self {
        Cache {
            across_namespaces: true,
            ..Cache::default()
        }
    }
}

impl<K: kube::Resource> Cache<K> {
    /// Applies one event; returns true when `items` changed.
    pub fn apply(&mut self, ev: watcher::Event<K>) -> bool {
        let across = self.across_namespaces;
        let key = |k: &K| {
            if across {
                namespaced_key(k.meta())
            } else {
                k.meta().name.clone().unwrap_or_default()
            }
        };
        match ev {
            watcher::Event::Init => {
                self.pending = Some(BTreeMap::new());
                false
            }
            watcher::Event::InitApply(k) => {
                let name = key(&k);
                self.pending
                    .get_or_insert_with(BTreeMap::new)
                    .insert(name, k);
                false
            }
            watcher::Event::InitDone => {
                self.items = self.pending.take().unwrap_or_default();
                true
            }
            watcher::Event::Apply(k) => {
                self.items.insert(key(&k), k);
                true
            }
            watcher::Event::Delete(k) => {
                self.items.remove(&key(&k));
                true
            }
        }
    }
}

/// The watched workload, as JSON, or None once deleted.
pub fn object_json(cache: &Cache<DynamicObject>, name: &str, ar: &ApiResource) -> Option<Value> {
    cache.items.get(name).map(|o| crate::ctx::typed_json(o, ar))
}

/// Pods owned by the workload (CloneSets own their pods directly; for other kinds every pod the
/// selector matches counts).
pub fn owned<'a>(
    pods: &'a Cache<Pod>,
    owner_uid: Option<&'a str>,
) -> impl Iterator<Item = &'a Pod> + 'a {
    pods.items.values().filter(move |p| match owner_uid {
        None => true,
        Some(uid) => p
            .metadata
            .owner_references
            .as_ref()
            .is_some_and(|o| o.iter().any(|r| r.uid == uid)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_410_counts_as_expired() {
        let status = |code| {
            watcher::Error::WatchError(Box::new(kube::core::Status {
                code,
                ..Default::default()
            }))
        };
        assert!(expired(&status(410)));
        assert!(!expired(&status(500)));
        assert!(!expired(&watcher::Error::NoResourceVersion));
    }
}
