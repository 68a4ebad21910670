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

/// Whether the kubelet's Events for one container say its image cannot be pulled now: the newest
/// of its pull failures, pulls and starts is a failure. Returns that failure's most telling
/// message (`Failed to pull image …` over `Error: ErrImagePull`).
///
/// Needed because a container the kubelet killed to change its image, and then cannot pull the
/// new image for, shows `CrashLoopBackOff` between its `ImagePullBackOff`s: the old container's
/// exit puts the restart back-off in force, so its status alone does not tell the two apart.
pub fn pull_failure<'a>(
    events: impl IntoIterator<Item = &'a K8sEvent>,
    pod_uid: &str,
    container: &str,
) -> Option<String> {
    let field_path = format!("spec.containers{{{container}}}");
    let mut rows: Vec<(Option<jiff::Timestamp>, bool, String)> = events
        .into_iter()
        .filter(|e| {
            e.involved_object.uid.as_deref() == Some(pod_uid)
                && e.involved_object.field_path.as_deref() == Some(field_path.as_str())
        })
        .filter_map(|e| {
            let row = event_row(e);
            let failed = match row.reason.as_str() {
                "Failed" => {
                    row.message.starts_with("Failed to pull image")
                        || row.message.contains("ErrImagePull")
                        || row.message.contains("ImagePullBackOff")
                }
                "BackOff" => row.message.starts_with("Back-off pulling image"),
                "Pulled" | "Started" => false,
                _ => return None,
            };
            (failed || matches!(row.reason.as_str(), "Pulled" | "Started")).then_some((
                row.time,
                failed,
                row.message,
            ))
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    if !rows.first().is_some_and(|r| r.1) {
        return None;
    }
    // The newest run of failures: the detailed message if one is among them.
    let run: Vec<&String> = rows.iter().take_while(|r| r.1).map(|r| &r.2).collect();
    run.iter()
        .find(|m| m.starts_with("Failed to pull image"))
        .or_else(|| run.first())
        .map(|m| (*m).clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(reason: &str, message: &str, at: &str, container: &str) -> K8sEvent {
        serde_json::from_value(json!({
            "metadata": {"name": format!("e-{reason}-{at}")},
            "involvedObject": {"kind": "Pod", "name": "p", "uid": "u1",
                               "fieldPath": format!("spec.containers{{{container}}}")},
            "reason": reason, "message": message, "lastTimestamp": at
        }))
        .expect("event")
    }

    #[test]
    fn newest_pull_failure_wins_over_an_older_start() {
        let events = [
            ev(
                "Started",
                "Started container app",
                "2026-01-01T00:00:00Z",
                "app",
            ),
            ev(
                "Failed",
                "Error: ErrImagePull",
                "2026-01-01T00:01:01Z",
                "app",
            ),
            ev(
                "Failed",
                "Failed to pull image \"r/app:x\": not found",
                "2026-01-01T00:01:00Z",
                "app",
            ),
            ev(
                "BackOff",
                "Back-off restarting failed container app",
                "2026-01-01T00:01:02Z",
                "app",
            ),
        ];
        assert_eq!(
            pull_failure(&events, "u1", "app").as_deref(),
            Some("Failed to pull image \"r/app:x\": not found")
        );
        assert_eq!(pull_failure(&events, "u2", "app"), None, "other Pod");
        assert_eq!(pull_failure(&events, "u1", "side"), None, "other container");
    }

    #[test]
    fn a_later_pull_or_start_clears_it() {
        let events = [
            ev(
                "Failed",
                "Failed to pull image \"a\": x",
                "2026-01-01T00:01:00Z",
                "app",
            ),
            ev(
                "Pulled",
                "Successfully pulled image \"a\"",
                "2026-01-01T00:02:00Z",
                "app",
            ),
        ];
        assert_eq!(pull_failure(&events, "u1", "app"), None);
        let events = [
            ev(
                "Failed",
                "Error: ImagePullBackOff",
                "2026-01-01T00:03:00Z",
                "app",
            ),
            ev(
                "Started",
                "Started container app",
                "2026-01-01T00:02:00Z",
                "app",
            ),
        ];
        assert_eq!(
            pull_failure(&events, "u1", "app").as_deref(),
            Some("Error: ImagePullBackOff")
        );
    }
}
