//! The PersistentPodState controller (upstream `pkg/controller/persistentpodstate`): records,
//! for each Ready Pod of the targeted StatefulSet, its node and the listed node labels and Pod
//! annotations (`status.podStates`), drops the states of Pods scaled away (per
//! `persistentPodStateRetentionPolicy`), and creates, updates or deletes the PersistentPodState
//! a StatefulSet's annotations ask for (`kruise.io/auto-generate-persistent-pod-state`).
//!
//! Imports flow one way: `controller` (wiring on the shared [`runner`](crate::runner)) →
//! `reconcile` (workload → node labels → status) and `generate` (a StatefulSet's annotations →
//! its PersistentPodState) → `plan` (pure: which Pods to record, the next status) →
//! `context`, `error`.

mod context;
pub mod controller;
mod error;
mod generate;
pub mod plan;
mod reconcile;

#[cfg(test)]
mod plan_tests;
