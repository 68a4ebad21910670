//! The writes one Advanced DaemonSet sync makes from its plan (upstream `manage` and
//! `rollingUpdate`): in-place progress and the lifecycle state it leaves, replacements (in place
//! through the shared engine, else recreated), creations, and deletions behind the preDelete
//! hook. Each step records what failed so the status can say it; the order stays upstream's.

use std::sync::Arc;

use futures::future::join_all;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::{CloneSetPodUpdateStrategyType, DaemonSet};
use kruise_api::appspub::{Lifecycle, LifecycleHook, LifecycleStateType};
use kube::api::{DeleteParams, PostParams};
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};

use super::context::Context;
use super::error::Error;
use super::pod::{self, AdsHooks};
use crate::expectations::ScaleAction;
use crate::inplace::{InPlaceHooks, UpdateOptions, UpdateOutcome};
use crate::workload::lifecycle::{WriteError, next_lifecycle_state, write_lifecycle};
use crate::workload::podutil;
use crate::workload::quiet::{Basis, is_quiet};
use crate::workload::update_step::{UpdateStep, update_step};

/// The first failed create or delete: its Event reason and the API error.
pub(super) type ScaleFailure = (&'static str, kube::Error);

/// One sync's view: the DaemonSet, its Pods and the update revision, with the API to write.
pub(super) struct Syncer<'a> {
    pub ctx: &'a Context,
    pub ds: &'a DaemonSet,
    /// The expectations key of the DaemonSet.
    pub key: &'a str,
    pub api: Api<Pod>,
    pub pods: &'a [Arc<Pod>],
    /// The update revision and the hash its Pods carry.
    pub update_rev: &'a ControllerRevision,
    pub hash: &'a str,
    pub opts: UpdateOptions,
    pub now: Timestamp,
}

/// What the replacement step leaves for the delete step, and the first update failure.
pub(super) struct Replaced {
    pub recreate: Vec<String>,
    pub update_err: Option<(String, Error)>,
}

impl Syncer<'_> {
    fn lifecycle(&self) -> Option<&Lifecycle> {
        self.ds.spec.lifecycle.as_ref()
    }

    pub fn pod(&self, name: &str) -> Option<&Arc<Pod>> {
        self.pods.iter().find(|p| podutil::name(p) == name)
    }

    /// The shared lifecycle writer, expecting every Pod it writes.
    async fn write_lifecycle(
        &self,
        p: &Pod,
        state: LifecycleStateType,
        handler: Option<&LifecycleHook>,
    ) -> Result<bool, WriteError> {
        let rv_exp = &self.ctx.rv_exp;
        let expect = |w: &Pod| {
            if let (Some(uid), Some(rv)) = (
                w.metadata.uid.as_deref(),
                w.metadata.resource_version.as_deref(),
            ) {
                rv_exp.expect(uid, rv);
            }
        };
        let lc = self.lifecycle();
        write_lifecycle(&self.api, lc, p, state, handler, self.now, &expect).await
    }

    /// In-place progress first: later batches, grace periods, InPlaceUpdateReady back to True;
    /// then the lifecycle state a finished update leaves (Updating → Updated → Normal, as
    /// CloneSet's `refreshPodState`).
    pub async fn refresh(&self) -> Result<(), Error> {
        // Pods unchanged since a refresh had nothing to do for them are not asked again (see
        // `workload::quiet`).
        let mut quiet = self.ctx.quiet.begin(
            self.key,
            Basis {
                generation: self.ds.metadata.generation,
                update_revision: self.hash.to_string(),
            },
        );
        for p in self.pods {
            if quiet.was_quiet(p) {
                continue;
            }
            if p.metadata.deletion_timestamp.is_none()
                && is_quiet(
                    &AdsHooks,
                    p,
                    &self.opts,
                    self.lifecycle(),
                    self.hash,
                    self.now,
                )
            {
                quiet.quiet(p);
                continue;
            }
            let out = self
                .ctx
                .inplace
                .refresh(&AdsHooks, p, &self.opts, self.now)
                .await?;
            if let (Some(uid), Some(rv)) = (
                p.metadata.uid.as_deref(),
                out.new_resource_version.as_deref(),
            ) {
                self.ctx.rv_exp.expect(uid, rv);
                // The cached Pod is stale now; its lifecycle moves on the next sync.
                continue;
            }
            if p.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let completed = AdsHooks.pod_update_completed(p).is_ok();
            if let Some(next) = next_lifecycle_state(self.lifecycle(), p, self.hash, completed) {
                self.write_lifecycle(p, next, None).await?;
            }
        }
        quiet.finish();
        Ok(())
    }

    /// Replaces the plan's old Pods: in place when `in_place` and the Pod has the readiness
    /// gate, else (or when the change cannot go in place) they are left for the delete step.
    pub async fn replace(
        &self,
        names: &[String],
        in_place: bool,
        revisions: &[ControllerRevision],
    ) -> Replaced {
        let mut out = Replaced {
            recreate: Vec::new(),
            update_err: None,
        };
        for name in names {
            let Some(p) = self.pod(name) else {
                continue;
            };
            let gated =
                kruise_api::pod::has_readiness_gate(p, kruise_api::keys::INPLACE_UPDATE_READY);
            if !(in_place && gated) {
                out.recreate.push(name.clone());
                continue;
            }
            match self.update_one(p, name, revisions).await {
                Ok(true) => out.recreate.push(name.clone()),
                Ok(false) => {}
                Err(e) => {
                    out.update_err.get_or_insert(e);
                }
            }
        }
        out
    }

    /// One Pod's update (CloneSet's per-Pod decision): the inPlaceUpdate hook first holds the
    /// Pod in PreparingUpdate; a change that cannot go in place recreates it. Returns whether
    /// the Pod is to be recreated; an error carries its status message.
    async fn update_one(
        &self,
        p: &Pod,
        name: &str,
        revisions: &[ControllerRevision],
    ) -> Result<bool, (String, Error)> {
        let old = revisions
            .iter()
            .find(|r| pod::pod_hash(p) == Some(pod::revision_hash(r).as_str()));
        let update_hook = self.lifecycle().and_then(|l| l.in_place_update.as_ref());
        let step = update_step(
            CloneSetPodUpdateStrategyType::InPlaceIfPossible,
            p,
            update_hook,
            || {
                AdsHooks
                    .calculate_spec(old, self.update_rev, &self.opts)
                    .map(|_| ())
            },
        );
        match step {
            UpdateStep::PrepareUpdateHook { handler } => {
                let state = LifecycleStateType::PreparingUpdate;
                if let Err(e) = self.write_lifecycle(p, state, handler).await {
                    return Err((e.to_string(), e.into()));
                }
                return Ok(false);
            }
            UpdateStep::Wait => return Ok(false),
            UpdateStep::Refuse(r) => {
                // The plan never picks a pre-deleting Pod; nothing else refuses under
                // InPlaceIfPossible. Leave the Pod alone rather than guess.
                tracing::warn!(pod = %name, refusal = ?r, "not updating pod");
                return Ok(false);
            }
            UpdateStep::Recreate { reason } => {
                if let Some(reason) = reason {
                    tracing::info!(pod = %name, %reason, "cannot update in place; recreating");
                }
                return Ok(true);
            }
            UpdateStep::InPlace => {}
        }
        self.update_in_place(p, name, old).await
    }

    /// Runs the engine on one Pod; `Ok(true)` when it finds the change cannot go in place.
    async fn update_in_place(
        &self,
        p: &Pod,
        name: &str,
        old: Option<&ControllerRevision>,
    ) -> Result<bool, (String, Error)> {
        // A Pod with a lifecycle state is Updating while its update runs.
        let mut opts = self.opts.clone();
        if podutil::lifecycle_state(p).is_some() {
            opts.lifecycle_state = Some(LifecycleStateType::Updating);
        }
        let outcome = match self
            .ctx
            .inplace
            .update(&AdsHooks, p, old, self.update_rev, &opts, self.now)
            .await
        {
            Ok(o) => o,
            Err(e) => {
                // One Pod refusing its update does not hold up the DaemonSet's others.
                let msg = e.to_string();
                self.ctx
                    .event(
                        self.ds,
                        EventType::Warning,
                        "FailedUpdatePodInPlace",
                        format!("failed to update pod {name} in place: {msg}"),
                    )
                    .await;
                return Err((msg, Error::from(e)));
            }
        };
        match outcome {
            UpdateOutcome::Updated {
                new_resource_version,
                ..
            } => {
                if let (Some(uid), Some(rv)) =
                    (p.metadata.uid.as_deref(), new_resource_version.as_deref())
                {
                    self.ctx.rv_exp.expect(uid, rv);
                }
                self.ctx
                    .event(
                        self.ds,
                        EventType::Normal,
                        "SuccessfulUpdatePodInPlace",
                        format!("successfully updated pod {name} in place"),
                    )
                    .await;
                Ok(false)
            }
            UpdateOutcome::NotInPlace(reason) => {
                tracing::info!(pod = %name, %reason, "cannot update in place; recreating");
                Ok(true)
            }
        }
    }

    /// Creates a Pod on each node, expected by name before it is sent.
    pub async fn create(&self, nodes: &[String], first_err: &mut Option<ScaleFailure>) {
        let ds = self.ds;
        let creates: Vec<_> = nodes
            .iter()
            .map(|node| {
                let name = crate::workload::nodes::pod_name(&ds.name_any());
                self.ctx
                    .scale_exp
                    .expect(self.key, ScaleAction::Create, &name);
                (
                    node.clone(),
                    pod::new_pod(ds, &ds.spec.template, self.hash, node, &name),
                )
            })
            .collect();
        let post = PostParams::default();
        let results = join_all(creates.iter().map(|(_, p)| self.api.create(&post, p))).await;
        for ((node, p), r) in creates.iter().zip(results) {
            if let Err(e) = r {
                self.ctx
                    .scale_exp
                    .observe(self.key, ScaleAction::Create, podutil::name(p));
                self.ctx
                    .event(
                        ds,
                        EventType::Warning,
                        "FailedCreate",
                        format!("failed to create pod for node {node}: {e}"),
                    )
                    .await;
                first_err.get_or_insert(("FailedCreate", e));
            }
        }
    }

    /// The preDelete hook (upstream `syncWithPreparingDelete`): a Pod it still holds only moves
    /// to PreparingDelete; it is deleted by a later sync, once its labels and finalizers are
    /// gone. Returns the Pods free to delete now and how many the hook holds.
    pub async fn hold_pre_deleting(
        &self,
        to_delete: Vec<String>,
        first_err: &mut Option<ScaleFailure>,
    ) -> (Vec<String>, usize) {
        let pre_delete = self.lifecycle().and_then(|l| l.pre_delete.as_ref());
        if pre_delete.is_none() {
            return (to_delete, 0);
        }
        let mut held = 0usize;
        let mut free = Vec::with_capacity(to_delete.len());
        for name in to_delete {
            let Some(p) = self
                .pod(&name)
                .filter(|p| podutil::is_hooked(pre_delete, p))
            else {
                free.push(name);
                continue;
            };
            held += 1;
            let state = LifecycleStateType::PreparingDelete;
            match self.write_lifecycle(p, state, None).await {
                Ok(true) => tracing::info!(pod = %name, "preDelete hook holds the pod"),
                Ok(false) => {}
                Err(e) => {
                    self.ctx
                        .event(
                            self.ds,
                            EventType::Warning,
                            "FailedDelete",
                            format!("failed to mark pod {name} PreparingDelete: {e}"),
                        )
                        .await;
                    if let WriteError::Kube(e) = e {
                        first_err.get_or_insert(("FailedDelete", e));
                    }
                }
            }
        }
        (free, held)
    }

    /// Deletes the Pods, expected by name before the calls are sent.
    pub async fn delete(&self, names: &[String], first_err: &mut Option<ScaleFailure>) {
        let exp = &self.ctx.scale_exp;
        for name in names {
            exp.expect(self.key, ScaleAction::Delete, name);
        }
        let del = DeleteParams::default();
        let results = join_all(names.iter().map(|n| self.api.delete(n, &del))).await;
        for (name, r) in names.iter().zip(results) {
            match r {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => {
                    exp.observe(self.key, ScaleAction::Delete, name);
                }
                Err(e) => {
                    exp.observe(self.key, ScaleAction::Delete, name);
                    self.ctx
                        .event(
                            self.ds,
                            EventType::Warning,
                            "FailedDelete",
                            format!("failed to delete pod {name}: {e}"),
                        )
                        .await;
                    first_err.get_or_insert(("FailedDelete", e));
                }
            }
        }
    }
}
