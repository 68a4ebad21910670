//! `migrate AdvancedStatefulSet --from StatefulSet`: a handover, not a move. A StatefulSet's Pods
//! are NAME-ORDINAL and keep their volumes, so no second set of Pods can be surged next to them;
//! as kruise-tools does, the StatefulSet is deleted with `--cascade=orphan` (its Pods, claims and
//! revisions stay) and an Advanced StatefulSet of the same name and template adopts them. The
//! same template gives the same revision name, so the Pods count as updated and none is
//! recreated; this command checks that and says so Pod by Pod.
//!
//! The order is chosen so that no two controllers ever act on the Pods at once: the Advanced
//! StatefulSet is validated first (a server-side dry run), created only once the StatefulSet is
//! gone and its Pods are orphans, and a rerun after an interruption resumes from what it finds.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams, Preconditions};
use kube::{Resource, ResourceExt};
use serde_json::Value;

use crate::cli::MigrateArgs;
use crate::ctx::{Ctx, Workload};
use crate::error::{CliError, Result, exit};
use crate::target::Target;
use crate::view::RolloutView;
use crate::view::migrate::{Record, advanced_statefulset_from_statefulset};
use crate::view::workload::Kind;

/// How often the handover reads the objects while it waits.
const POLL: Duration = Duration::from_millis(500);

/// How long the garbage collector gets to orphan the StatefulSet's Pods.
const ORPHAN_LIMIT: Duration = Duration::from_secs(60);

pub async fn run(ctx: &Ctx, args: &MigrateArgs) -> Result<i32> {
    refuse_flags(args)?;
    let name = args.src();
    let from = format!("StatefulSet/{name}");
    let dst = Workload::locate(
        ctx,
        &Target {
            kind: Kind::AdvancedStatefulSet,
            name: name.to_owned(),
        },
    )
    .await?;
    let dst_label = dst.target.to_string();
    let src_label = format!("statefulset/{name}");
    let sts_api: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let source = sts_api
        .get_opt(name)
        .await
        .map_err(|e| CliError::from_kube(e, None))?;
    let existing = match dst.fetch_raw().await {
        Ok(v) => Some(v),
        Err(CliError::NotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    let recorded = match &existing {
        Some(obj) => Record::read(obj, &dst_label).map_err(usage)?,
        None => None,
    };
    if let Some(r) = &recorded {
        r.check_source(&from, &dst_label).map_err(usage)?;
    }
    let Some(source) = source else {
        // Gone: either an earlier run deleted it (resume) or there is nothing to hand over.
        return match (&existing, &recorded) {
            (Some(_), Some(r)) => {
                println!("resuming the handover recorded on {dst_label} ({src_label} is gone)");
                if args.dry_run {
                    println!(
                        "{dst_label}: waits for its {} Pods\n(dry run: nothing changed)",
                        r.replicas
                    );
                    return Ok(exit::OK);
                }
                wait_adopted(ctx, &dst, r.replicas, &BTreeMap::new(), args).await?;
                Ok(exit::OK)
            }
            _ => Err(CliError::Missing(format!(
                "{src_label} not found in namespace {:?}: check --src-name and -n (if an interrupted migrate deleted it, create the Advanced StatefulSet from the JSON that run printed)",
                ctx.namespace
            ))),
        };
    };
    let replicas = i64::from(source.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1));
    if let Some(obj) = &existing {
        // Next to a live StatefulSet an Advanced StatefulSet of the same name would take its
        // Pods at the handover and scale them to its own replicas.
        return Err(CliError::Usage(format!(
            "{dst_label} already exists next to {src_label} (with {} replicas): delete it (it controls no Pods while {src_label} does) and rerun, so the handover creates it with {src_label}'s spec",
            obj["spec"]["replicas"]
        )));
    }
    let record = Record::begin(&from, replicas, 0, None).map_err(usage)?;
    let raw = serde_json::to_value(&source).map_err(|e| CliError::Other(e.into()))?;
    let body = advanced_statefulset_from_statefulset(&raw, &dst.resource.version, &record)
        .map_err(usage)?;
    let pods = owned_pods(ctx, &source).await?;
    if args.dry_run {
        return dry_run(args, &body, &src_label, &dst_label, replicas, &pods);
    }
    warn_not_moved(ctx, name, &src_label, &dst_label, &dst.resource.api_version).await;
    let obj: DynamicObject =
        serde_json::from_value(body.clone()).map_err(|e| CliError::Other(e.into()))?;
    // Refused now (a webhook, a quota, RBAC), it is refused before the StatefulSet goes.
    dst.api
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &obj,
        )
        .await
        .map_err(|e| dst.not_found(e))?;
    let uids: BTreeMap<String, String> = pods
        .iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect();
    orphan_delete(&sts_api, &source).await?;
    println!(
        "{src_label} deleted with --cascade=orphan: its {} Pods, claims and revisions stay",
        pods.len()
    );
    // From here until the create, the object exists only in this process: any failure prints
    // it, since a rerun no longer finds the StatefulSet to make it from.
    let text = serde_json::to_string(&body).unwrap_or_default();
    if let Err(e) = wait_orphaned(ctx, &sts_api, name, &source).await {
        let why = format!(
            "{e}; if {src_label} is gone by then, create {dst_label} with `kubectl create -f -` from this JSON:\n{text}"
        );
        return Err(match e {
            CliError::Timeout(_) => CliError::Timeout(why),
            _ => CliError::Failed(why),
        });
    }
    if let Err(e) = dst.api.create(&PostParams::default(), &obj).await {
        return Err(CliError::Failed(format!(
            "{src_label} is deleted and its Pods run without a controller, but creating {dst_label} failed ({}): create it with `kubectl create -f -` from this JSON, or rerun after fixing the cause:\n{text}",
            dst.not_found(e)
        )));
    }
    println!("{dst_label} created with {replicas} replicas; it adopts the Pods");
    wait_adopted(ctx, &dst, replicas, &uids, args).await?;
    Ok(exit::OK)
}

/// The flags that mean something else for a handover, refused naming why.
fn refuse_flags(args: &MigrateArgs) -> Result<()> {
    if args.dst() != args.src() {
        return Err(CliError::Usage(format!(
            "--dst-name {}: an Advanced StatefulSet takes over a StatefulSet's Pods by their names ({}-ORDINAL), so it must have the StatefulSet's name: leave --dst-name out",
            args.dst(),
            args.src()
        )));
    }
    if args.replicas().is_some() {
        return Err(CliError::Usage(
            "--replicas: a StatefulSet's Pods are handed over all at once (they keep their names and volumes); leave --replicas out".to_owned(),
        ));
    }
    if args.create && !args.copy {
        return Err(CliError::Usage(
            "--create without --copy: an Advanced StatefulSet of 0 replicas next to the StatefulSet would take its Pods at the handover and delete them; run without --create (or with --create --copy): the handover creates it with the StatefulSet's replicas".to_owned(),
        ));
    }
    if args.max_surge != 1 {
        eprintln!(
            "note: --max-surge is ignored: no Pod is added or removed, the same Pods change controller"
        );
    }
    Ok(())
}

fn usage(e: impl std::fmt::Display) -> CliError {
    CliError::Usage(e.to_string())
}

/// The Pods the StatefulSet controls, by name.
async fn owned_pods(ctx: &Ctx, sts: &StatefulSet) -> Result<Vec<Pod>> {
    let uid = sts.uid().unwrap_or_default();
    let selector = sts
        .spec
        .as_ref()
        .and_then(|s| kruise_api::selector::to_selector_string(&s.selector))
        .unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let mut pods: Vec<Pod> = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| CliError::from_kube(e, None))?
        .items
        .into_iter()
        .filter(|p| controller_uid(p) == Some(uid.as_str()))
        .collect();
    pods.sort_by_key(|p| p.name_any());
    Ok(pods)
}

fn controller_uid(p: &Pod) -> Option<&str> {
    p.meta()
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

fn dry_run(
    args: &MigrateArgs,
    body: &Value,
    src: &str,
    dst: &str,
    replicas: i64,
    pods: &[Pod],
) -> Result<i32> {
    super::print_object(body, args.output)?;
    let names: Vec<String> = pods.iter().map(ResourceExt::name_any).collect();
    eprintln!("would delete {src} with --cascade=orphan (its Pods, claims and revisions stay)");
    eprintln!(
        "would create {dst} with {replicas} replicas, adopting {} without recreating them",
        if names.is_empty() {
            "no Pods".to_owned()
        } else {
            names.join(", ")
        }
    );
    eprintln!("(dry run: nothing changed)");
    Ok(exit::OK)
}

/// Deletes the StatefulSet leaving its dependents, only if it is still the one read.
async fn orphan_delete(api: &Api<StatefulSet>, sts: &StatefulSet) -> Result<()> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: sts.uid(),
            resource_version: None,
        }),
        ..DeleteParams::orphan()
    };
    match api.delete(&sts.name_any(), &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(CliError::from_kube(e, None)),
    }
}

/// Waits until the StatefulSet is gone and none of its Pods names it as controller: only then can
/// the Advanced StatefulSet adopt them (it never takes a Pod another controller holds).
async fn wait_orphaned(
    ctx: &Ctx,
    api: &Api<StatefulSet>,
    name: &str,
    sts: &StatefulSet,
) -> Result<()> {
    let started = Instant::now();
    loop {
        let gone = api
            .get_opt(name)
            .await
            .map_err(|e| CliError::from_kube(e, None))?
            .is_none_or(|s| s.uid() != sts.uid());
        if gone && owned_pods(ctx, sts).await?.is_empty() {
            return Ok(());
        }
        if started.elapsed() >= ORPHAN_LIMIT {
            return Err(CliError::Timeout(format!(
                "statefulset/{name} still holds its Pods after {}s (is the garbage collector running?); rerun the same command to continue",
                ORPHAN_LIMIT.as_secs()
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until the Advanced StatefulSet controls `replicas` Pods, all Ready and updated, then
/// says, Pod by Pod, whether it is the same Pod as before (`before`: name → UID; empty when a
/// rerun resumes).
async fn wait_adopted(
    ctx: &Ctx,
    dst: &Workload,
    replicas: i64,
    before: &BTreeMap<String, String>,
    args: &MigrateArgs,
) -> Result<()> {
    let started = Instant::now();
    let limit = args.limit();
    let label = dst.target.to_string();
    loop {
        let obj = dst.fetch_raw().await?;
        let view = RolloutView::from_json(&obj);
        let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
        let selector = selector_of(&obj);
        let pods: Vec<Pod> = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| CliError::from_kube(e, None))?
            .items
            .into_iter()
            .filter(|p| controller_uid(p) == Some(uid))
            .collect();
        let settled = view.observed_generation >= view.generation
            && i64::try_from(pods.len()).unwrap_or(0) == replicas
            && view.ready_replicas >= replicas
            && view.updated_replicas >= replicas;
        if settled {
            let mut kept = 0;
            for p in &pods {
                let name = p.name_any();
                match before.get(&name) {
                    Some(u) if Some(u.as_str()) == p.uid().as_deref() => kept += 1,
                    Some(_) => println!("  {name}: recreated (new UID)"),
                    None => {}
                }
            }
            if before.is_empty() {
                println!("{label} controls its {replicas} Pods, all Ready and updated");
            } else {
                println!(
                    "{label} took over {kept} of {} Pods in place (same UIDs, not restarted); revision {}",
                    before.len(),
                    view.update_revision
                );
            }
            println!(
                "not moved: HorizontalPodAutoscalers and PodDisruptionBudgets are untouched (a PodDisruptionBudget selects by label and still covers the Pods)"
            );
            return Ok(());
        }
        if !limit.is_zero() && started.elapsed() >= limit {
            return Err(CliError::Timeout(format!(
                "timed out after {}s: {label} controls {} of {replicas} Pods ({} ready, {} updated); rerun the same command to keep waiting",
                limit.as_secs(),
                pods.len(),
                view.ready_replicas,
                view.updated_replicas
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `spec.selector` as a label selector string.
fn selector_of(obj: &Value) -> String {
    serde_json::from_value(obj["spec"]["selector"].clone())
        .ok()
        .and_then(|s| kruise_api::selector::to_selector_string(&s))
        .unwrap_or_default()
}

/// Names the HorizontalPodAutoscalers that scale the StatefulSet: they stop working when it
/// goes, and are not moved.
async fn warn_not_moved(ctx: &Ctx, name: &str, src: &str, dst: &str, dst_api_version: &str) {
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let Ok(list) = hpas.list(&ListParams::default()).await else {
        return;
    };
    for hpa in list.items {
        let Some(spec) = &hpa.spec else { continue };
        if spec.scale_target_ref.kind == "StatefulSet"
            && spec.scale_target_ref.name == name
            && spec
                .scale_target_ref
                .api_version
                .as_deref()
                .is_none_or(|v| v.starts_with("apps/"))
        {
            eprintln!(
                "warning: HorizontalPodAutoscaler {} scales {src} and is not moved: point its scaleTargetRef at {dst} (apiVersion {dst_api_version})",
                hpa.metadata.name.unwrap_or_default(),
            );
        }
    }
}
