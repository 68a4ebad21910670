//! PodProbeMarker and NodePodProbe in the manager (upstream `pkg/controller/podprobemarker` and
//! `pkg/controller/nodepodprobe`), as three loops over shared caches:
//!
//! - markers: each PodProbeMarker's finalizer (upstream's `kruise.io/node-pod-probe-cleanup`,
//!   released once no NodePodProbe lists the deleted marker's probes), its status, and a
//!   Warning Event on a matched Pod that lacks a probed container;
//! - nodes: each Node's NodePodProbe, created with the Node as owner (so it goes with the
//!   Node) and its `spec.podProbes` kept equal to [`plan::node_pod_probes`] — a level-triggered
//!   rewrite, so a deleted Pod drops out, and a marker being deleted at once;
//! - results: each NodePodProbe's status (the daemon's results) turned into the Pods' labels,
//!   annotations and conditions ([`results::pod_marks`]); a NodePodProbe whose Node is gone is
//!   deleted.
//!
//! A virtual-kubelet (serverless) node gets no NodePodProbe: with
//! `EnablePodProbeMarkerOnServerless` the markers' loop marks its Pods from the conditions the
//! node's own agent reports ([`serverless`]).

pub mod context;
pub mod controller;
pub mod error;
pub mod plan;
mod reconcile;
pub mod results;
pub mod serverless;
