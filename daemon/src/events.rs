//! Kubernetes Events for what a user would look for in `kubectl describe` (pull results on the
//! NodeImage, container stops on the pod). Best effort: a failed event never fails the duty.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Reporting controller name, as upstream's event sources are named `kruise-daemon-*`.
const REPORTER: &str = "kruise-daemon";

#[derive(Clone)]
pub struct Events {
    recorder: Option<Recorder>,
}

impl Events {
    /// Events reported as `kruise-daemon` from this node.
    pub fn new(client: kube::Client, node: &str) -> Self {
        let reporter = Reporter {
            controller: REPORTER.into(),
            instance: Some(node.to_string()),
        };
        Events {
            recorder: Some(Recorder::new(client, reporter)),
        }
    }

    /// A sink that drops everything (tests, tools).
    pub fn disabled() -> Self {
        Events { recorder: None }
    }

    /// Publishes in the background so the caller never waits on the API server.
    pub fn emit(
        &self,
        reference: ObjectReference,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let Some(rec) = self.recorder.clone() else {
            return;
        };
        let ev = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        tokio::spawn(async move {
            if let Err(e) = rec.publish(&ev, &reference).await {
                tracing::debug!(error = %e, reason = %ev.reason, "cannot publish event");
            }
        });
    }
}

/// Reference to a pod from the CRI's view of it (what the daemon knows without a GET).
pub fn pod_ref(namespace: &str, name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(namespace.to_string()),
        name: Some(name.to_string()),
        uid: Some(uid.to_string()).filter(|u| !u.is_empty()),
        ..Default::default()
    }
}
