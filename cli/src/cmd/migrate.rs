//! `migrate CloneSet --from Deployment`: kruise-tools' command, resumable. The pure half (the
//! CloneSet made from the Deployment, the record, the next step) is `view::migrate`; this file
//! reads the two workloads, performs one step at a time and says what it did. The StatefulSet
//! handover is [`statefulset`].

mod statefulset;
mod storage;

use std::time::{Duration, Instant};

use crate::cli::{MigrateArgs, MigrateFrom, MigrateTo, ObjectFormat};
use crate::ctx::{Ctx, Workload};
use crate::error::{CliError, Result, exit};
use crate::target::Target;
use crate::view::RolloutView;
use crate::view::migrate::{Observed, Record, Step, cloneset_from_deployment, next_step, plan};
use crate::view::workload::Kind;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kruise_api::keys;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

/// How often the move reads the two workloads while it waits.
const POLL: Duration = Duration::from_secs(1);

/// The moves other than a Deployment's to a CloneSet (storage, a StatefulSet's), and the
/// combinations refused; `None` for a Deployment's move to a CloneSet, which [`run`] makes.
async fn elsewhere(ctx: &Ctx, args: &MigrateArgs) -> Option<Result<i32>> {
    if args.to == MigrateTo::Storage {
        if args.from.is_some() || args.src_name.is_some() || args.dst_name.is_some() {
            return Some(Err(CliError::Usage(
                "migrate storage takes no --from, --src-name or --dst-name: it rewrites every Kruise object".to_owned(),
            )));
        }
        return Some(storage::run(ctx, args).await);
    }
    let (Some(from), Some(_)) = (args.from, args.src_name.as_ref()) else {
        return Some(Err(CliError::Usage(
            "--from and --src-name are required: migrate CloneSet --from Deployment --src-name NAME (or AdvancedStatefulSet --from StatefulSet)".to_owned(),
        )));
    };
    match (args.to, from) {
        (MigrateTo::Storage, _) => Some(storage::run(ctx, args).await),
        (MigrateTo::CloneSet, MigrateFrom::Deployment) => None,
        (MigrateTo::AdvancedStatefulSet, MigrateFrom::StatefulSet) => {
            Some(statefulset::run(ctx, args).await)
        }
        (MigrateTo::CloneSet, MigrateFrom::StatefulSet) => Some(Err(CliError::Usage(
            "a CloneSet is filled --from Deployment; a StatefulSet goes to an AdvancedStatefulSet"
                .to_owned(),
        ))),
        (MigrateTo::AdvancedStatefulSet, MigrateFrom::Deployment) => Some(Err(CliError::Usage(
            "an AdvancedStatefulSet is filled --from StatefulSet; a Deployment goes to a CloneSet"
                .to_owned(),
        ))),
    }
}

pub async fn run(ctx: &Ctx, args: &MigrateArgs) -> Result<i32> {
    if let Some(handled) = elsewhere(ctx, args).await {
        return handled;
    }
    let src = workload(ctx, Kind::Deployment, args.src()).await?;
    let dst = workload(ctx, Kind::CloneSet, args.dst()).await?;
    let (src_label, dst_label) = (src.target.to_string(), dst.target.to_string());
    let from = format!("Deployment/{}", args.src());
    let source = match src.fetch_raw().await {
        Ok(v) => v,
        Err(CliError::NotFound { .. }) => {
            return Err(CliError::Missing(format!(
                "{src_label} not found in namespace {:?}: check --src-name and -n",
                ctx.namespace
            )));
        }
        Err(e) => return Err(e),
    };
    let existing = match dst.fetch_raw().await {
        Ok(v) => Some(v),
        Err(CliError::NotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    let source_replicas = replicas(&source);
    let moving = args.copy || !args.create;
    let (record, created) = match &existing {
        Some(obj) => {
            let record = Record::read(obj, &dst_label).map_err(usage)?;
            if args.create && (!args.copy || record.is_none()) {
                return Err(CliError::Usage(already_exists(
                    &dst_label,
                    record.is_some(),
                )));
            }
            match record {
                Some(r) => {
                    r.check_source(&from, &dst_label).map_err(usage)?;
                    if args.replicas().is_some_and(|n| n != r.replicas) {
                        eprintln!(
                            "note: {dst_label} records a move of {} replicas; --replicas {} is ignored (remove annotation {} to start afresh)",
                            r.replicas,
                            args.replicas,
                            keys::MIGRATION_ANNOTATION
                        );
                    }
                    println!(
                        "resuming the move recorded on {dst_label} ({} of {}'s {} replicas)",
                        r.replicas, src_label, r.source_replicas
                    );
                    (r, None)
                }
                None => (
                    Record::begin(&from, source_replicas, replicas(obj), args.replicas())
                        .map_err(usage)?,
                    None,
                ),
            }
        }
        None if !args.create => {
            return Err(CliError::Missing(format!(
                "{dst_label} not found in namespace {:?}: add --create to make it from {src_label} (or check --dst-name)",
                ctx.namespace
            )));
        }
        None => {
            let r = Record::begin(&from, source_replicas, 0, args.replicas()).map_err(usage)?;
            let body = cloneset_from_deployment(
                &source,
                args.dst(),
                &dst.resource.version,
                0,
                moving.then_some(&r),
            )
            .map_err(usage)?;
            (r, Some(body))
        }
    };
    let now = observe(&source, existing.as_ref());
    if args.dry_run {
        return dry_run(
            args,
            &record,
            &now,
            created.as_ref(),
            moving,
            &dst_label,
            &src_label,
        );
    }
    if let Some(body) = &created {
        create(&dst, body).await?;
        println!("{dst_label} created from {src_label} with 0 replicas");
    } else if existing
        .as_ref()
        .is_some_and(|o| Record::read(o, &dst_label).ok().flatten().is_none())
    {
        annotate(&dst, &record).await?;
    }
    if !moving {
        println!(
            "move the replicas with: kubectl kruise migrate CloneSet --from Deployment -n {} --src-name {} --dst-name {}",
            ctx.namespace,
            args.src(),
            args.dst()
        );
        return Ok(exit::OK);
    }
    move_and_report(ctx, &src, &dst, &source, &record, args).await
}

/// Moves the replicas `record` says from `src` to `dst`, saying so.
async fn move_and_report(
    ctx: &Ctx,
    src: &Workload,
    dst: &Workload,
    source: &Value,
    record: &Record,
    args: &MigrateArgs,
) -> Result<i32> {
    let (src_label, dst_label) = (src.target.to_string(), dst.target.to_string());
    warn_not_moved(ctx, source, &src_label).await;
    println!(
        "moving {} of {src_label}'s {} replicas to {dst_label}, {} at a time",
        record.replicas, record.source_replicas, args.max_surge
    );
    move_replicas(src, dst, record, args).await?;
    println!(
        "migrated {} replicas from {src_label} to {dst_label}; {src_label} kept with {} replicas (delete it when you no longer need it)",
        record.replicas,
        record.source_target()
    );
    println!("{}", not_moved(&src_label, &dst_label));
    Ok(exit::OK)
}

async fn workload(ctx: &Ctx, kind: Kind, name: &str) -> Result<Workload> {
    Workload::locate(
        ctx,
        &Target {
            kind,
            name: name.to_owned(),
        },
    )
    .await
}

fn usage(e: impl std::fmt::Display) -> CliError {
    CliError::Usage(e.to_string())
}

fn already_exists(dst: &str, recorded: bool) -> String {
    if recorded {
        format!(
            "{dst} already exists (an earlier migrate made it): add --copy to move the replicas into it, or drop --create"
        )
    } else {
        format!(
            "{dst} already exists: drop --create to move replicas into it, or give another --dst-name"
        )
    }
}

fn replicas(obj: &Value) -> i64 {
    obj["spec"]["replicas"].as_i64().unwrap_or(1)
}

/// The two workloads as the step function reads them; a destination not created yet has none.
fn observe(source: &Value, dst: Option<&Value>) -> Observed {
    let Some(dst) = dst else {
        return Observed {
            source: replicas(source),
            destination_ready: true,
            ..Observed::default()
        };
    };
    let view = RolloutView::from_json(dst);
    let want = replicas(dst);
    Observed {
        source: replicas(source),
        destination: want,
        // Nothing to wait for at 0 (a CloneSet just created has no status yet).
        destination_ready: want == 0
            || (view.observed_generation >= view.generation
                && view.available_replicas >= want
                && view.ready_replicas >= want),
        destination_available: view.available_replicas,
    }
}

fn dry_run(
    args: &MigrateArgs,
    record: &Record,
    now: &Observed,
    created: Option<&Value>,
    moving: bool,
    dst: &str,
    src: &str,
) -> Result<i32> {
    let mut notes = Vec::new();
    if let Some(body) = created {
        print_object(body, args.output)?;
        notes.push(format!("would create {dst} from {src} with 0 replicas"));
    }
    if moving {
        notes.extend(
            plan(record, now, args.max_surge)
                .iter()
                .map(|s| describe(s, dst, src)),
        );
    }
    notes.push("(dry run: nothing changed)".to_owned());
    // With an object on stdout (for `| kubectl apply -f -`), the steps go to stderr.
    for line in notes {
        if created.is_some() {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }
    Ok(exit::OK)
}

/// Prints the object a dry run would create, as `format` asks, on stdout (for `| kubectl apply
/// -f -`).
fn print_object(body: &Value, format: ObjectFormat) -> Result<()> {
    let text = match format {
        ObjectFormat::Yaml => {
            serde_saphyr::to_string(body).map_err(|e| CliError::Other(e.into()))?
        }
        ObjectFormat::Json => {
            serde_json::to_string_pretty(body).map_err(|e| CliError::Other(e.into()))? + "\n"
        }
    };
    print!("{text}");
    Ok(())
}

fn describe(step: &Step, dst: &str, src: &str) -> String {
    match *step {
        Step::ScaleDestination { from, to } => format!("{dst}: replicas {from} -> {to}"),
        Step::ScaleSource { from, to } => format!("{src}: replicas {from} -> {to}"),
        Step::WaitDestination { available, want } => {
            format!("{dst}: {available}/{want} Pods available")
        }
        Step::Done => format!("{dst}: done"),
    }
}

async fn create(dst: &Workload, body: &Value) -> Result<()> {
    let obj: DynamicObject =
        serde_json::from_value(body.clone()).map_err(|e| CliError::Other(e.into()))?;
    dst.api
        .create(&PostParams::default(), &obj)
        .await
        .map_err(|e| dst.not_found(e))?;
    Ok(())
}

async fn annotate(dst: &Workload, record: &Record) -> Result<()> {
    let patch =
        json!({"metadata": {"annotations": {keys::MIGRATION_ANNOTATION: record.to_annotation()}}});
    dst.merge_patch(&patch).await.map(|_| ())
}

/// One step at a time until both workloads are at their targets, reading both before each.
async fn move_replicas(
    src: &Workload,
    dst: &Workload,
    record: &Record,
    args: &MigrateArgs,
) -> Result<()> {
    let started = Instant::now();
    let limit = args.limit();
    let (src_label, dst_label) = (src.target.to_string(), dst.target.to_string());
    let mut last_wait = None;
    loop {
        let source = src.fetch_raw().await?;
        let dest = dst.fetch_raw().await?;
        let step = next_step(record, &observe(&source, Some(&dest)), args.max_surge);
        let (target, from, to) = match step {
            Step::Done => return Ok(()),
            Step::WaitDestination { .. } => {
                if last_wait != Some(step) {
                    println!("{}", describe(&step, &dst_label, &src_label));
                    last_wait = Some(step);
                }
                if !limit.is_zero() && started.elapsed() >= limit {
                    return Err(CliError::Timeout(format!(
                        "timed out after {}s: {}; rerun the same command to continue",
                        limit.as_secs(),
                        describe(&step, &dst_label, &src_label)
                    )));
                }
                tokio::time::sleep(POLL).await;
                continue;
            }
            Step::ScaleDestination { from, to } => (dst, from, to),
            Step::ScaleSource { from, to } => (src, from, to),
        };
        last_wait = None;
        // Guarded by the replicas read: a concurrent change fails the patch and is re-read.
        let ops = json!([
            {"op": "test", "path": "/spec/replicas", "value": from},
            {"op": "replace", "path": "/spec/replicas", "value": to}
        ]);
        match target.json_patch(ops).await {
            Ok(()) => println!("{}", describe(&step, &dst_label, &src_label)),
            Err(CliError::Api(m)) if m.contains("HTTP 422") || m.contains("HTTP 409") => {
                tracing::debug!(message = %m, "replicas changed underneath; re-reading");
            }
            Err(e) => return Err(e),
        }
    }
}

fn not_moved(src: &str, dst: &str) -> String {
    format!(
        "not moved: HorizontalPodAutoscalers still target {src} (point their scaleTargetRef at {dst}); the Service is untouched and serves both sets of Pods (same labels); PodDisruptionBudgets select Pods by label and cover both"
    )
}

/// Names the HorizontalPodAutoscalers that scale the source (they would scale it back up during
/// the move) and the PodDisruptionBudgets over its Pods, best effort.
async fn warn_not_moved(ctx: &Ctx, source: &Value, src_label: &str) {
    let name = source["metadata"]["name"].as_str().unwrap_or_default();
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    if let Ok(list) = hpas.list(&ListParams::default()).await {
        for hpa in list.items {
            let Some(spec) = &hpa.spec else { continue };
            if spec.scale_target_ref.kind == "Deployment" && spec.scale_target_ref.name == name {
                eprintln!(
                    "warning: HorizontalPodAutoscaler {} scales {src_label} and may scale it back up during the move; it is not moved",
                    hpa.metadata.name.unwrap_or_default()
                );
            }
        }
    }
    let labels = &source["spec"]["template"]["metadata"]["labels"];
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    if let Ok(list) = pdbs.list(&ListParams::default()).await {
        for pdb in list.items {
            let matches = pdb
                .spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .and_then(|s| s.match_labels.as_ref())
                .is_some_and(|m| {
                    m.iter()
                        .all(|(k, v)| labels[k].as_str() == Some(v.as_str()))
                });
            if matches {
                eprintln!(
                    "note: PodDisruptionBudget {} selects {src_label}'s Pods by label and will cover the new ones too",
                    pdb.metadata.name.unwrap_or_default()
                );
            }
        }
    }
}
