//! kruise-manager: the controllers and the shared in-place update engine.

pub use kruise_runtime::backoff;
pub mod app;
pub mod broadcastjob;
pub mod cloneset;
pub mod crr;
pub mod daemonset;
pub mod expectations;
pub mod heap;
pub mod history;
pub mod imagepulljob;
pub mod inplace;
pub mod launchpriority;
pub mod leader;
pub mod metrics;
pub mod nodeimage;
pub mod podcache;
pub mod podreadiness;
pub mod podunavailablebudget;
pub use kruise_runtime::ratelimit;
pub use kruise_runtime::runner;
pub mod revcache;
pub mod revision;
pub mod server;
pub mod sidecarset;
pub mod statefulset;
pub mod workload;
