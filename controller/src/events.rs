//! The controllers' Events: built one way (the reason doubles as the action, as upstream's
//! recorders report it) and published as a report, never as part of the work — a refusal is
//! logged and the reconcile goes on.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};

/// An Event of `type_` with `reason` and `note`; `secondary` names the object it concerns (a Pod,
/// a revision), which also keeps Events about different objects from folding into one series.
pub fn event(
    type_: EventType,
    reason: &str,
    note: String,
    secondary: Option<ObjectReference>,
) -> Event {
    Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: reason.to_owned(),
        secondary,
    }
}

/// Publishes `ev` about `about`. A namespace being deleted refuses new Events (expected: logged at
/// debug); any other failure is logged at warn.
pub async fn publish_event(recorder: &Recorder, ev: &Event, about: &ObjectReference) {
    match recorder.publish(ev, about).await {
        Ok(()) => {}
        Err(kube::Error::Api(s)) if s.is_forbidden() && s.message.contains("being terminated") => {
            tracing::debug!(reason = %ev.reason, "event refused: the namespace is terminating");
        }
        Err(e) => tracing::warn!(error = %e, reason = %ev.reason, "failed to publish an Event"),
    }
}

/// [`event`] then [`publish_event`].
pub async fn publish(
    recorder: &Recorder,
    about: &ObjectReference,
    type_: EventType,
    reason: &str,
    note: String,
) {
    publish_event(recorder, &event(type_, reason, note, None), about).await;
}
