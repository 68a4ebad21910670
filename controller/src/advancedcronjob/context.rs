//! Shared state of the AdvancedCronJob controller (client, the stores of the three kinds of
//! run, the clock, Events).

use std::sync::Arc;

use crate::events::Recorder;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kruise_api::apps::v1beta1::{AdvancedCronJob, BroadcastJob, ImageListPullJob};
use kube::runtime::events::{EventType, Reporter};
use kube::runtime::reflector::Store;
use kube::{Client, Resource};

use crate::backoff::{Backoff, Policy};
use crate::metrics::Metrics;

/// Name in Events, logs and the field manager (upstream's).
pub const CONTROLLER_NAME: &str = "advancedcronjob-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "advancedcronjob";

/// The time the controller plans with; tests drive their own.
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

/// The system clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// The runs of every AdvancedCronJob, one store per kind (filled by the controller's watches).
pub struct Runs {
    pub jobs: Store<Job>,
    pub broadcastjobs: Store<BroadcastJob>,
    pub imagelistpulljobs: Store<ImageListPullJob>,
}

/// Shared state of the controller.
pub struct Context {
    pub client: Client,
    pub runs: Runs,
    pub clock: Arc<dyn Clock>,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub namespace: Option<String>,
    pub backoff: Arc<Backoff>,
}

impl Context {
    pub fn new(
        client: Client,
        runs: Runs,
        metrics: Arc<Metrics>,
        instance: Option<String>,
        namespace: Option<String>,
    ) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER_NAME.to_string(),
            instance,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            runs,
            clock: Arc::new(SystemClock),
            metrics,
            namespace,
            backoff: Arc::new(Backoff::new(Policy::DEFAULT)),
        }
    }

    /// Publish an Event on the AdvancedCronJob; a refused Event is only logged.
    pub(super) async fn event(
        &self,
        acj: &AdvancedCronJob,
        warning: bool,
        reason: &str,
        note: String,
    ) {
        let ev = crate::events::event(
            if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason,
            note,
            None,
        );
        crate::events::publish_event(&self.recorder, &ev, &acj.object_ref(&())).await;
    }
}
