//! Wiring of the ResourceDistribution controller on the shared [`runner`](crate::runner): the
//! distributions; Namespace events (upstream `enqueueRequestForNamespace`: a new namespace the
//! targets match, a deleted one they list, one whose labels changed so that a selector matches
//! it now or matched it before); and the copies (upstream's owner watch of Secrets and
//! ConfigMaps: a copy edited or deleted by hand is put back). The copies are watched as
//! metadata only, so no Secret data is held in the manager's memory.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kruise_api::apps::v1alpha1::ResourceDistribution;
use kruise_api::keys;
use kube::ResourceExt;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use super::context::{Context, METRIC_NAME};
use super::plan::{NamespaceInfo, namespace_event_concerns};
use super::reconcile::reconcile;
use crate::registry::{self, Shared};
use crate::runner::{self, Controller};
use kruise_api::features::Gate;

/// Reconciles of different distributions at once (upstream's default worker count).
const CONCURRENCY: u16 = 3;

/// The registry's entry (started when its feature gate allows).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: "resourcedistribution",
    enabled: |gates| gates.enabled(Gate::ResourceDistributionGate),
    start: |shared| Box::pin(run(shared.clone())),
};

/// Runs the controller until `shutdown` is cancelled.
pub async fn run(shared: Shared) {
    let Shared {
        client,
        metrics,
        shutdown,
        ..
    } = shared.clone();
    let (namespaces, writer) = reflector::store::<Namespace>();
    let ns_events = reflector::reflector(
        writer,
        watcher(
            Api::<Namespace>::all(client.clone()),
            watcher::Config::default(),
        ),
    )
    .default_backoff();
    let ctx = Arc::new(Context::new(&shared, namespaces));
    let api: Api<ResourceDistribution> = Api::all(client.clone());
    let ctl = Controller::watching(METRIC_NAME, runner::watch(api), metrics, shutdown)
        .concurrency(CONCURRENCY);
    let store = ctl.store();
    let mut seen = NamespaceLabels::default();
    let ns_wake = ns_events.flat_map(move |ev| {
        let refs = match ev {
            Ok(ev) => seen.targets(&store, ev),
            Err(e) => {
                tracing::debug!(error = %e, "namespace watch error");
                Vec::new()
            }
        };
        futures::stream::iter(refs)
    });
    ctl.trigger_refs(ns_wake)
        .trigger_refs(copy_owners(Api::<PartialObjectMeta<Secret>>::all(
            client.clone(),
        )))
        .trigger_refs(copy_owners(Api::<PartialObjectMeta<ConfigMap>>::all(
            client,
        )))
        .run(reconcile, ctx)
        .await;
}

/// The distribution controlling each changed or deleted object of the watched kind.
fn copy_owners<K>(
    api: Api<PartialObjectMeta<K>>,
) -> impl Stream<Item = ObjectRef<ResourceDistribution>> + Send
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
    K: serde::de::DeserializeOwned,
{
    watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(|ev| {
            futures::future::ready(match ev {
                Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o)) => owner(&o),
                // The initial list: every distribution is reconciled at start anyway.
                Ok(_) => None,
                Err(e) => {
                    tracing::debug!(error = %e, "copy watch error");
                    None
                }
            })
        })
}

fn owner<K>(o: &PartialObjectMeta<K>) -> Option<ObjectRef<ResourceDistribution>> {
    o.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| {
            r.controller == Some(true)
                && r.kind == keys::RD_KIND
                && r.api_version == keys::APPS_V1ALPHA1
        })
        .map(|r| ObjectRef::new(&r.name))
}

/// The last state seen of each namespace, to know which distributions an update concerns.
#[derive(Default)]
struct NamespaceLabels(BTreeMap<String, NamespaceInfo>);

impl NamespaceLabels {
    /// The distributions one Namespace event concerns.
    fn targets(
        &mut self,
        store: &Store<ResourceDistribution>,
        ev: watcher::Event<Namespace>,
    ) -> Vec<ObjectRef<ResourceDistribution>> {
        let (old, new) = match ev {
            watcher::Event::Apply(ns) | watcher::Event::InitApply(ns) => {
                let info = NamespaceInfo {
                    name: ns.name_any(),
                    labels: ns.labels().clone(),
                    terminating: ns.metadata.deletion_timestamp.is_some(),
                };
                (self.0.insert(info.name.clone(), info.clone()), Some(info))
            }
            watcher::Event::Delete(ns) => {
                let name = ns.name_any();
                let old = self.0.remove(&name).unwrap_or(NamespaceInfo {
                    name,
                    ..NamespaceInfo::default()
                });
                (Some(old), None)
            }
            watcher::Event::Init | watcher::Event::InitDone => return Vec::new(),
        };
        store
            .state()
            .iter()
            .filter(|rd| namespace_event_concerns(&rd.spec.targets, old.as_ref(), new.as_ref()))
            .map(|rd| ObjectRef::from_obj(rd.as_ref()))
            .collect()
    }
}
