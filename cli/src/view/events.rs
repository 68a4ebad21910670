//! Events about a workload and its Pods, as the live view and `describe` show them.

use crate::view::PodView;
use k8s_openapi::api::core::v1::Event as K8sEvent;

#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub time: Option<jiff::Timestamp>,
    pub type_: String,
    pub reason: String,
    pub object: String,
    pub message: String,
}

pub fn event_row(e: &K8sEvent) -> EventRow {
    let time = e
        .last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0));
    EventRow {
        time,
        type_: e.type_.clone().unwrap_or_default(),
        reason: e.reason.clone().unwrap_or_default(),
        object: format!(
            "{}/{}",
            e.involved_object
                .kind
                .clone()
                .unwrap_or_default()
                .to_lowercase(),
            e.involved_object.name.clone().unwrap_or_default()
        ),
        message: e.message.clone().unwrap_or_default().replace('\n', " "),
    }
}

/// Events about the workload or its pods, newest first, at most 50.
pub fn relevant_events<'a>(
    events: impl IntoIterator<Item = &'a K8sEvent>,
    name: &str,
    pods: &[PodView],
) -> Vec<EventRow> {
    let names: std::collections::HashSet<&str> = pods.iter().map(|p| p.name.as_str()).collect();
    let mut rows: Vec<EventRow> = events
        .into_iter()
        .filter(|e| {
            let n = e.involved_object.name.as_deref().unwrap_or_default();
            n == name || names.contains(n)
        })
        .map(event_row)
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.time));
    rows.truncate(50);
    rows
}
