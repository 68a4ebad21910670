//! The controller registry: what every controller starts from ([`Shared`]), the one shape each
//! controller exposes ([`Controller`]: its name, its feature gate, its start), and the part of a
//! controller's context that most of them hold alike ([`Base`]).
//!
//! Upstream keeps one list of `Add(mgr)` functions (`pkg/controller/controllers.go`), each
//! checking its own gate; here each controller folder declares `controller::CONTROLLER` and
//! `app.rs` lists them ([`crate::app::CONTROLLERS`]), started together by [`run`].

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use kruise_api::features::FeatureGates;
use kube::core::NamespaceResourceScope;
use kube::runtime::events::{EventType, Reporter};
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

use crate::backoff::{Backoff, Policy};
use crate::events::Recorder;
use crate::metrics::Metrics;
use crate::podcache::PodCache;
use crate::pvccache::PvcCache;
use crate::revcache::RevisionCache;

/// What every controller may start from: the client, the manager's shared caches, metrics,
/// gates, scope and the shutdown token. Built once per leadership term.
#[derive(Clone)]
pub struct Shared {
    pub client: Client,
    /// The manager's one Pod cache (synced before the controllers start).
    pub pods: PodCache,
    pub metrics: Arc<Metrics>,
    /// The reporting instance the controllers' Events carry (`$POD_NAME`).
    pub instance: Option<String>,
    /// The only namespace whose Pods and workloads are watched; `None`: all.
    pub watch_namespace: Option<String>,
    /// The process's feature gates.
    pub gates: FeatureGates,
    /// One ControllerRevision watch for the three workloads that keep revisions.
    pub revisions: RevisionCache,
    /// The PersistentVolumeClaims CloneSets claim.
    pub pvcs: PvcCache,
    /// Cancelled when this replica stops leading or the process shuts down.
    pub shutdown: CancellationToken,
}

impl Shared {
    /// Starts the shared watches (revisions, PVCs) and names the reporting instance.
    pub fn start(
        client: Client,
        pods: PodCache,
        metrics: Arc<Metrics>,
        gates: FeatureGates,
        watch_namespace: Option<String>,
        shutdown: CancellationToken,
    ) -> Self {
        let ns = watch_namespace.as_deref();
        Self {
            revisions: RevisionCache::start(client.clone(), ns, shutdown.clone()),
            pvcs: crate::pvccache::start(client.clone(), ns, shutdown.clone()),
            instance: std::env::var("POD_NAME").ok(),
            client,
            pods,
            metrics,
            watch_namespace,
            gates,
            shutdown,
        }
    }

    /// The Event recorder of the controller named `controller` (upstream's name, e.g.
    /// `cloneset-controller`).
    pub fn recorder(&self, controller: &str) -> Recorder {
        let reporter = Reporter {
            controller: controller.to_owned(),
            instance: self.instance.clone(),
        };
        Recorder::new(self.client.clone(), reporter)
    }

    /// An API of `K` over the watched namespace (all namespaces when none is set).
    pub fn watched<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        scoped(&self.client, self.watch_namespace.as_deref())
    }

    /// The [`Base`] of the controller named `controller`.
    pub fn base(&self, controller: &str) -> Base {
        Base {
            client: self.client.clone(),
            pods: self.pods.clone(),
            recorder: self.recorder(controller),
            metrics: self.metrics.clone(),
            watch_namespace: self.watch_namespace.clone(),
            backoff: Arc::new(Backoff::new(Policy::DEFAULT)),
        }
    }
}

/// An API of `K` in `namespace`, or in all namespaces.
fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// One controller as the manager starts it.
pub struct Controller {
    /// What the log names when the gate keeps it off.
    pub name: &'static str,
    /// Whether the feature gates let it run (upstream's early return in its `Add`).
    pub enabled: fn(&FeatureGates) -> bool,
    /// Its run, until [`Shared::shutdown`].
    pub start: fn(&Shared) -> BoxFuture<'static, ()>,
}

/// The gate of a controller that always runs.
pub fn always(_: &FeatureGates) -> bool {
    true
}

/// Starts every controller of `controllers` whose gate allows it and runs them all until they
/// end (at shutdown); says once for each of the others that it is off.
pub async fn run(controllers: &[Controller], shared: &Shared) {
    let mut running = Vec::with_capacity(controllers.len());
    for c in controllers {
        if (c.enabled)(&shared.gates) {
            running.push((c.start)(shared));
        } else {
            tracing::info!(controller = c.name, "not started: its feature gate is off");
        }
    }
    futures::future::join_all(running).await;
}

/// What most controllers' contexts hold alike. A context that holds one dereferences to it, so
/// `ctx.client` or `ctx.pods` read the same in every controller.
pub struct Base {
    pub client: Client,
    pub pods: PodCache,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    /// The only namespace watched; `None`: all.
    pub watch_namespace: Option<String>,
    /// The runner's per-object backoff, shared so a reconcile can read it.
    pub backoff: Arc<Backoff>,
}

impl Base {
    /// An API of `K` over the watched namespace (all namespaces when none is set).
    pub fn watched<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        scoped(&self.client, self.watch_namespace.as_deref())
    }

    /// Publishes an Event about `about`; a refused Event is only logged.
    pub async fn event(
        &self,
        about: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        self.event_related(about, type_, reason, note, None).await;
    }

    /// [`Self::event`] naming the object it concerns (`related`, e.g. a Pod).
    pub async fn event_related(
        &self,
        about: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
        related: Option<ObjectReference>,
    ) {
        let ev = crate::events::event(type_, reason, note, related);
        crate::events::publish_event(&self.recorder, &ev, about).await;
    }
}

/// `Warning` when `warning`, else `Normal`.
pub fn event_type(warning: bool) -> EventType {
    if warning {
        EventType::Warning
    } else {
        EventType::Normal
    }
}

/// A context holding a [`Base`] in its field `base` reads its fields directly.
#[macro_export]
macro_rules! deref_base {
    ($context:ty) => {
        impl ::std::ops::Deref for $context {
            type Target = $crate::registry::Base;
            fn deref(&self) -> &$crate::registry::Base {
                &self.base
            }
        }
    };
}
