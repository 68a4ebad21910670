//! Image pre-pull, manager side: the ImagePullJob and ImageListPullJob controllers.
//!
//! An ImagePullJob picks its target nodes (`podSelector` → nodes of matching pods;
//! `selector.names`; `selector` labels; else every node), writes a tag owned by the job into the
//! NodeImage of at most `parallelism` nodes that are not pulling it yet, copies its pull secrets
//! into kruise-daemon-config, and computes its status from the NodeImage statuses the daemon
//! writes. `completionPolicy: Always` jobs finish when every target node is done or at
//! `activeDeadlineSeconds`, and are deleted `ttlSecondsAfterFinished` later; `Never` jobs keep
//! serving new nodes. The finalizer `apps.kruise.io/deletion-protection` makes sure the secret
//! copies are released, and [`follow`] keeps each copy equal to its source while the job runs.
//! An ImageListPullJob ([`list`]) owns one ImagePullJob per image.
//!
//! Entry point: [`controller::CONTROLLER`] in the manager's registry runs both controllers;
//! podSelector jobs follow Pods through the manager's shared [`PodCache`](crate::podcache::PodCache). CloneSet pre-download is
//! [`crate::workload::predownload::ensure_predownload_jobs`], in the shared workload layer.
//!
//! RBAC: `imagepulljobs` get/list/watch/create/update/patch/delete, `imagepulljobs/status`
//! update; `imagelistpulljobs` get/list/watch/patch/delete, `imagelistpulljobs/status` update;
//! `nodeimages` get/list/watch/update; `secrets` get (any namespace: only the sources jobs
//! name, read by name, never listed or watched) and
//! list/create/update/delete (kruise-daemon-config); `namespaces` get; `pods` via the cache;
//! `controllerrevisions` patch (pre-download).

pub mod context;
pub mod controller;
pub mod error;
pub mod follow;
pub mod image;
pub mod list;
pub mod plan;
mod reconcile;
pub mod secrets;
