//! One reconcile of an AdvancedCronJob, as named steps: its runs from the store of the
//! template's kind → the pure [`plan::plan`] → prune the history → replace and create the due
//! run → the status (type, active runs, lastScheduleTime) → requeue at the next point.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1beta1::{
    AdvancedCronJob, AdvancedCronJobStatus, BroadcastJob, ImageListPullJob, TemplateKind,
};
use kruise_api::keys;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::children::{self, NewRun};
use super::context::Context;
use super::error::Error;
use super::plan::{self, Child, Problem, Run};

/// One run as the reconcile sees it: what the plan reads and the reference `status.active`
/// shows.
type Runs = Vec<(Child, ObjectReference)>;

/// One reconcile of `acj`.
pub async fn reconcile(acj: Arc<AdvancedCronJob>, ctx: Arc<Context>) -> Result<Action, Error> {
    if acj.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = acj.namespace().ok_or(Error::Unnamed)?;
    let uid = acj.uid().ok_or(Error::Unnamed)?;
    // Before the first list of the runs every run would look absent: Forbid would start a
    // second run and Replace would miss the first.
    if !stores_ready(&ctx) {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let Some(kind) = acj.spec.template_kind() else {
        ctx.event(
            &acj,
            true,
            keys::ADVANCEDCRONJOB_REASON_MISSING_TEMPLATE,
            "spec.template sets none of jobTemplate, broadcastJobTemplate, \
             imageListPullJobTemplate"
                .to_owned(),
        )
        .await;
        return Ok(Action::await_change());
    };
    let runs = runs(&ctx, kind, &ns, &uid);
    let kids: Vec<Child> = runs.iter().map(|r| r.0.clone()).collect();
    let now = ctx.clock.now();
    let plan = plan::plan(&acj, &kids, now);
    prune(&ctx, &acj, kind, &ns, &runs, &plan.prune).await;
    let mut status = AdvancedCronJobStatus {
        type_: Some(kind),
        active: plan.active.iter().map(|&i| runs[i].1.clone()).collect(),
        last_schedule_time: plan.last_schedule_time.map(Time),
    };
    let acted = act(&ctx, &acj, kind, &ns, &runs, &plan.run, &mut status).await;
    write_status(&ctx, &acj, &ns, &status).await?;
    acted?;
    // The next point is `requeue` after `now`, not after this reconcile's API calls: counted
    // from the end, a reconcile slower than the time left to the next point overslept it, and
    // that point was never run (only the latest missed point runs).
    let spent = ctx.clock.now().duration_since(now).unsigned_abs();
    Ok(plan.requeue.map_or_else(Action::await_change, |d| {
        Action::requeue(d.saturating_sub(spent))
    }))
}

fn stores_ready(ctx: &Context) -> bool {
    let r = &ctx.runs;
    r.jobs.wait_until_ready().now_or_never().is_some()
        && r.broadcastjobs.wait_until_ready().now_or_never().is_some()
        && r.imagelistpulljobs
            .wait_until_ready()
            .now_or_never()
            .is_some()
}

/// The runs of the AdvancedCronJob `uid`, of the template's kind.
fn runs(ctx: &Context, kind: TemplateKind, ns: &str, uid: &str) -> Runs {
    fn of<K: Resource<DynamicType = ()> + Clone>(
        store: &kube::runtime::reflector::Store<K>,
        ns: &str,
        uid: &str,
        child: fn(&K) -> Child,
    ) -> Runs {
        store
            .state()
            .iter()
            .filter(|o| {
                o.meta().namespace.as_deref() == Some(ns) && children::owned_by(o.meta(), uid)
            })
            .map(|o| (child(o), children::reference(o.as_ref())))
            .collect()
    }
    let r = &ctx.runs;
    match kind {
        TemplateKind::Job => of(&r.jobs, ns, uid, children::job_child),
        TemplateKind::BroadcastJob => of(&r.broadcastjobs, ns, uid, children::broadcastjob_child),
        TemplateKind::ImageListPullJob => of(
            &r.imagelistpulljobs,
            ns,
            uid,
            children::imagelistpulljob_child,
        ),
    }
}

/// Deletes a run in the background (its Pods or pull jobs go by garbage collection); a run
/// already gone is no error.
async fn delete_run(
    ctx: &Context,
    kind: TemplateKind,
    ns: &str,
    name: &str,
) -> Result<(), kube::Error> {
    let params = DeleteParams::background();
    let c = ctx.client.clone();
    let res = match kind {
        TemplateKind::Job => Api::<Job>::namespaced(c, ns)
            .delete(name, &params)
            .await
            .map(|_| ()),
        TemplateKind::BroadcastJob => Api::<BroadcastJob>::namespaced(c, ns)
            .delete(name, &params)
            .await
            .map(|_| ()),
        TemplateKind::ImageListPullJob => Api::<ImageListPullJob>::namespaced(c, ns)
            .delete(name, &params)
            .await
            .map(|_| ()),
    };
    match res {
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        other => other,
    }
}

/// History limits, best effort as upstream: a refused deletion is logged and retried at the
/// next reconcile.
async fn prune(
    ctx: &Context,
    acj: &AdvancedCronJob,
    kind: TemplateKind,
    ns: &str,
    runs: &Runs,
    which: &[usize],
) {
    for &i in which {
        let name = &runs[i].0.name;
        match delete_run(ctx, kind, ns, name).await {
            Ok(()) => {
                tracing::info!(run = %name, "deleted old finished run");
                ctx.event(
                    acj,
                    false,
                    keys::REASON_SUCCESSFUL_DELETE,
                    format!("Deleted job {name}"),
                )
                .await;
            }
            Err(e) => tracing::warn!(run = %name, error = %e, "failed to delete old run"),
        }
    }
}

/// What the plan's [`Run`] asks for; `status` follows what was done.
async fn act(
    ctx: &Context,
    acj: &AdvancedCronJob,
    kind: TemplateKind,
    ns: &str,
    runs: &Runs,
    run: &Run,
    status: &mut AdvancedCronJobStatus,
) -> Result<(), Error> {
    match run {
        Run::Idle => Ok(()),
        Run::TooLate { at } => {
            tracing::info!(point = %at, "missed the starting deadline of the last point");
            Ok(())
        }
        Run::Forbidden { at } => {
            ctx.event(
                acj,
                false,
                keys::ADVANCEDCRONJOB_REASON_JOB_ALREADY_ACTIVE,
                format!(
                    "Not starting the run of {at}: a prior run is active and \
                     concurrencyPolicy is Forbid"
                ),
            )
            .await;
            Ok(())
        }
        Run::Problem(p) => {
            let reason = match p {
                Problem::Schedule { .. } => keys::ADVANCEDCRONJOB_REASON_UNPARSEABLE_SCHEDULE,
                Problem::TooManyMissed => keys::ADVANCEDCRONJOB_REASON_TOO_MANY_MISSED,
            };
            ctx.event(acj, true, reason, p.to_string()).await;
            Err(p.clone().into())
        }
        Run::Create { at, name, replace } => {
            for &i in replace {
                let (child, _) = &runs[i];
                delete_run(ctx, kind, ns, &child.name).await?;
                status
                    .active
                    .retain(|r| r.name.as_deref() != Some(child.name.as_str()));
                tracing::info!(run = %child.name, "deleted active run (concurrencyPolicy Replace)");
            }
            create(ctx, acj, kind, ns, name, at, status).await
        }
    }
}

/// Creates the run of `at`. A run of that name that exists already was created for this point
/// by an earlier reconcile whose write this one's view has not caught up with: it counts as
/// done, so a point never runs twice.
async fn create(
    ctx: &Context,
    acj: &AdvancedCronJob,
    kind: TemplateKind,
    ns: &str,
    name: &str,
    at: &jiff::Zoned,
    status: &mut AdvancedCronJobStatus,
) -> Result<(), Error> {
    let Some(obj) = children::new_run(acj, kind, name, at) else {
        return Ok(());
    };
    let c = ctx.client.clone();
    let res = match obj {
        NewRun::Job(j) => post(Api::<Job>::namespaced(c, ns), &j).await,
        NewRun::BroadcastJob(j) => post(Api::<BroadcastJob>::namespaced(c, ns), &j).await,
        NewRun::ImageListPullJob(j) => post(Api::<ImageListPullJob>::namespaced(c, ns), &j).await,
    };
    match res {
        Ok(reference) => {
            tracing::info!(run = %name, point = %at, "created run");
            status.active.push(reference);
            ctx.event(
                acj,
                false,
                keys::REASON_SUCCESSFUL_CREATE,
                format!("Created job {name}"),
            )
            .await;
        }
        Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists" => {
            tracing::debug!(run = %name, "run exists already");
        }
        Err(e) => {
            ctx.event(
                acj,
                true,
                keys::REASON_FAILED_CREATE,
                format!("Error creating job {name}: {e}"),
            )
            .await;
            return Err(e.into());
        }
    }
    let point = Time(at.timestamp());
    if status
        .last_schedule_time
        .as_ref()
        .is_none_or(|t| t.0 < point.0)
    {
        status.last_schedule_time = Some(point);
    }
    Ok(())
}

async fn post<K>(api: Api<K>, obj: &K) -> Result<ObjectReference, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let created = api.create(&PostParams::default(), obj).await?;
    Ok(children::reference(&created))
}

/// Writes the status when it changed (a merge patch clearing fields the new one omits).
async fn write_status(
    ctx: &Context,
    acj: &AdvancedCronJob,
    ns: &str,
    new: &AdvancedCronJobStatus,
) -> Result<(), Error> {
    if acj.status.as_ref() == Some(new) {
        return Ok(());
    }
    let patch = crate::workload::status::status_patch(acj.status.as_ref(), new)?;
    let api: Api<AdvancedCronJob> = Api::namespaced(ctx.client.clone(), ns);
    api.patch_status(
        &acj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await?;
    Ok(())
}
