//! What the workload controllers share, below all of them (upstream keeps these in
//! `pkg/util/{lifecycle,updatesort,specifieddelete,...}` under `pkg/controller/*`). A workload
//! folder (`cloneset`, `statefulset`, `daemonset`, `sidecarset`, ...) imports this layer, the
//! in-place engine and the runner; never another workload, and nothing here imports a workload.
//!
//! Pure decisions, time a parameter: `podutil` (Pod predicates and orderings), `lifecycle`'s
//! state machine, `update_step` (what to do with one Pod chosen for update), `updatesort`
//! (priority and scatter order), `podfacts` (what a reconcile's walks read of each Pod, read
//! once), `intstr` (int-or-percent and partition math), `claim`
//! (owned / adopt / release), `specifieddelete`, `nodes` (which nodes a per-node Pod may run on,
//! and binding it there). The writes: `podpatch` (one Pod patch),
//! `lifecycle`'s writer, `predownload` (image pre-download jobs before in-place updates), and
//! `budget` (a PodUnavailableBudget's charge before a workload updates a Pod), `status` (the
//! status merge patch). `quiet` remembers the Pods a refresh had nothing to do for, by
//! resource version, so a reconcile's refresh costs what changed, not every Pod. `pace` is the
//! pause after a reconcile, in proportion to the Pods it walked, that coalesces a large
//! workload's Pod events into fewer reconciles.
//! The expectations gate stays at the crate top, [`crate::expectations`]: non-Pod controllers
//! (ImageListPullJob) use it too.

pub mod budget;
pub mod claim;
pub mod intstr;
pub mod lifecycle;
pub mod nodes;
pub mod pace;
pub mod podfacts;
pub mod podpatch;
pub mod podutil;
pub mod predownload;
pub mod quiet;
pub mod specifieddelete;
pub mod status;
pub mod update_step;
pub mod updatesort;
