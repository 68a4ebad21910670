//! The NodeImage controller: one NodeImage per Node, named after it.
//!
//! - A Node that has been Ready for [`plan::CREATION_DELAY_AFTER_READY`] gets a NodeImage
//!   carrying the node's labels (ImagePullJob label selectors match on them); label changes are
//!   copied over. A NodeImage whose Node is gone is deleted (unless labelled
//!   `apps.kruise.io/fake-nodeimage`).
//! - Tags whose ImagePullJob owners are gone, tags past their TTL, old-style pull-secret
//!   references whose copy is gone and images without tags are removed from the spec.
//! - Tags the daemon never answered for (or that outlive their activeDeadlineSeconds) are marked
//!   Failed in the status; everything else in the status belongs to the daemon.
//!
//! Entry point: [`controller::CONTROLLER`] in the manager's registry; it watches Nodes, NodeImages and
//! ImagePullJobs itself (none of them is in a shared cache). RBAC: `nodes` get/list/watch;
//! `nodeimages` get/list/watch/create/update/patch/delete; `nodeimages/status` update;
//! `imagepulljobs` get/list/watch; `secrets` get (namespace kruise-daemon-config);
//! `events.k8s.io events` create.

pub mod context;
pub mod controller;
pub mod error;
pub mod plan;
mod reconcile;
