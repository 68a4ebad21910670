//! What the PodProbeMarkers of the namespace say about each Pod on view: the probes whose
//! selector matches the Pod, and the state the manager marked on it (the probe's Pod condition,
//! or else which state's marker labels the Pod carries). Read every few seconds.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::apps::v1alpha1::{PodProbeMarker, ProbeState};
use kruise_api::keys::k8s;
use kruise_api::selector;
use kube::{Api, ResourceExt};
use tokio::sync::mpsc;

use crate::view::PodView;

/// How often the PodProbeMarkers are listed.
const PERIOD: Duration = Duration::from_secs(2);

/// One probe of one marker, as much of it as tells its state on a Pod.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProbeRule {
    pub marker: String,
    pub probe: String,
    pub selector: LabelSelector,
    /// Empty when the probe records no condition.
    pub condition_type: String,
    /// The labels the marker puts on a Pod in each state (`markerPolicy`).
    pub labels: Vec<(ProbeState, BTreeMap<String, String>)>,
}

/// A probe's state on one Pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub probe: String,
    pub state: ProbeState,
    /// When the probe's condition last changed, if it records one.
    pub since: Option<jiff::Timestamp>,
}

/// The rules of `markers`, in marker then probe order.
pub fn rules(markers: &[PodProbeMarker]) -> Vec<ProbeRule> {
    let mut out: Vec<ProbeRule> = markers
        .iter()
        .flat_map(|m| {
            m.spec.probes.iter().map(|p| ProbeRule {
                marker: m.name_any(),
                probe: p.name.clone(),
                selector: m.spec.selector.clone(),
                condition_type: p.pod_condition_type.clone(),
                labels: p
                    .marker_policy
                    .iter()
                    .filter(|mp| !mp.labels.is_empty())
                    .map(|mp| (mp.state, mp.labels.clone()))
                    .collect(),
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.marker, &a.probe).cmp(&(&b.marker, &b.probe)));
    out
}

/// The marks of every rule whose selector matches `pod`. The Pod condition speaks first (it is
/// written with the state's labels and carries the transition time); a probe without one is
/// read from its marker labels; neither yet is Unknown (not probed, or not marked yet).
pub fn marks(rules: &[ProbeRule], pod: &PodView) -> Vec<Mark> {
    let many = rules
        .iter()
        .filter(|r| selector::matches(&r.selector, &pod.labels))
        .map(|r| r.marker.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        > 1;
    rules
        .iter()
        .filter(|r| selector::matches(&r.selector, &pod.labels))
        .map(|r| {
            let cond = (!r.condition_type.is_empty())
                .then(|| pod.conditions.get(&r.condition_type))
                .flatten();
            let state = match cond {
                Some(c) if c.status == k8s::CONDITION_TRUE => ProbeState::Succeeded,
                Some(c) if c.status == k8s::CONDITION_FALSE => ProbeState::Failed,
                _ => r
                    .labels
                    .iter()
                    .find(|(_, want)| want.iter().all(|(k, v)| pod.labels.get(k) == Some(v)))
                    .map_or(ProbeState::Unknown, |(s, _)| *s),
            };
            Mark {
                // Probe names are unique within a marker only.
                probe: if many {
                    format!("{}/{}", r.marker, r.probe)
                } else {
                    r.probe.clone()
                },
                state,
                since: cond.and_then(|c| c.since),
            }
        })
        .collect()
}

/// The marks in a table row: `healthy✓ tcp✗ warm?`.
pub fn row_text(marks: &[Mark]) -> String {
    marks
        .iter()
        .map(|m| {
            let sign = match m.state {
                ProbeState::Succeeded => "✓",
                ProbeState::Failed => "✗",
                ProbeState::Unknown => "?",
            };
            format!("{}{sign}", m.probe)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Sends the namespace's probe rules to `tx` until the view goes; stops at once where the kind
/// is not installed or may not be listed.
pub async fn poll(api: Api<PodProbeMarker>, tx: mpsc::UnboundedSender<Vec<ProbeRule>>) {
    loop {
        match api.list(&Default::default()).await {
            Ok(list) => {
                if tx.send(rules(&list.items)).is_err() {
                    return;
                }
            }
            Err(kube::Error::Api(s)) if matches!(s.code, 403 | 404) => return,
            Err(e) => tracing::debug!(error = %e, "cannot list PodProbeMarkers"),
        }
        tokio::time::sleep(PERIOD).await;
    }
}
