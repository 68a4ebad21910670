//! Shared state of the AdvancedCronJob controller (client, the stores of the three kinds of
//! run, the clock, Events).

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kruise_api::apps::v1beta1::{AdvancedCronJob, BroadcastJob, ImageListPullJob};
use kube::Resource;
use kube::runtime::reflector::Store;

use crate::registry::{Base, Shared, event_type};

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
    base: Base,
    pub runs: Runs,
    pub clock: Arc<dyn Clock>,
}

crate::deref_base!(Context);

impl Context {
    pub fn new(shared: &Shared, runs: Runs) -> Self {
        Self {
            base: shared.base(CONTROLLER_NAME),
            runs,
            clock: Arc::new(SystemClock),
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
        let about = acj.object_ref(&());
        self.base
            .event(&about, event_type(warning), reason, note)
            .await;
    }
}
