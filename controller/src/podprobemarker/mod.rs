//! PodProbeMarker and NodePodProbe in the manager (upstream `pkg/controller/podprobemarker` and
//! `pkg/controller/nodepodprobe`), as three loops over shared caches:
//!
//! - markers: each PodProbeMarker's status, and a Warning Event on a matched Pod that lacks
//!   a probed container;
//! - nodes: each Node's NodePodProbe, created with the Node as owner (so it goes with the
//!   Node) and its `spec.podProbes` kept equal to [`plan::node_pod_probes`] — a level-triggered
//!   rewrite, so a deleted Pod or marker drops out without a finalizer;
//! - results: each NodePodProbe's status (the daemon's results) turned into the Pods' labels,
//!   annotations and conditions ([`results::pod_marks`]); a NodePodProbe whose Node is gone is
//!   deleted.

pub mod context;
pub mod controller;
pub mod plan;
mod reconcile;
pub mod results;

pub use controller::run;
