//! The behaviour suite: every end-to-end test file, as modules of one test binary, so the suite
//! links once and a runner (cargo-nextest, `.config/nextest.toml`) schedules tests from all files
//! in parallel on one cluster, each in its own namespace.
//!
//! Where a test runs is decided by its module and name (the filtersets in `.config/nextest.toml`,
//! used by `hack/test.sh`):
//! - `smoke::` runs first, alone: when it fails the run stops with the components' logs.
//! - `serial::` tests (in any module) disturb what every other test relies on (they kill the
//!   manager or daemon, rotate the webhook's certificates, reconfigure the installed manager):
//!   they run one at a time after the parallel phase.
//! - `gated_` tests (in any module) need feature gates that are off by default: they run in
//!   parallel after the serial phase, against a manager started once with every gate of
//!   `kruise_e2e::manager::GATED_PHASE` on (`kruise-e2e-gates on`, from `hack/test.sh`).
//! - `cloneset_kwok::`, `daemonset_kwok::`, `broadcastjob_kwok::`, `persistentpodstate_kwok::` and `workloadspread_kwok::` run on the kwok scale cluster; `plugin_install::`, `helm_values::` and `plugin_dev::`
//!   on the cluster once Kruise-rs is uninstalled.
//! - everything else runs in parallel against Kruise-rs installed from `deploy/`.

mod advancedcronjob;
mod api_versions;
mod broadcastjob;
mod broadcastjob_kwok;
mod cli;
mod cli_kruise_history;
mod cli_migrate;
mod cli_stuck;
mod cli_top;
mod cli_workloads;
mod cloneset;
mod cloneset_kwok;
mod cluster;
mod crd_versions;
mod crr;
mod daemon_cri;
mod daemonset;
mod daemonset_kwok;
mod deletion_protection;
mod ephemeraljob;
mod helm_values;
mod imagepull;
mod incluster;
mod inplace_vpa;
mod launch_priority;
mod manager_restart;
mod observability;
mod persistentpodstate;
mod persistentpodstate_kwok;
mod plugin_dev;
mod plugin_install;
mod podprobemarker;
mod podprobemarker_serverless;
mod podunavailablebudget;
mod resourcedistribution;
mod runtime_meta;
mod scale;
mod sidecarset;
mod sidecarset_resources;
mod sidecarterminator;
mod smoke;
mod statefulset;
mod statefulset_claims;
mod tui;
mod tui_workloads;
mod uniteddeployment;
mod uniteddeployment_adaptive;
mod webhook;
mod webhook_gates;
mod webhook_scope;
mod workload_gates;
mod workloadspread;
mod workloadspread_kwok;
