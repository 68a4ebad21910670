//! A seeded fault campaign: rollouts of every workload kind, faults injected at points chosen
//! from a seed (killed manager replicas, daemon, API server, etcd, kubelet; a deleted webhook
//! certificate; every watch cut), a history of every object recorded by watches of the
//! campaign's own, and invariants checked over that history. `make chaos`; RELIABILITY.md.

mod campaign;
pub mod faults;
pub mod history;
pub mod invariants;
pub mod report;
pub mod schedule;
pub mod workloads;

pub use campaign::{Injection, Options, Outcome, Round, recheck, run};
