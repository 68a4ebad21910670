//! `rollout pause|resume|partition|promote|list`.

mod subset;

use crate::cli::Output;
use crate::cmd::status::print_doc;
use crate::ctx::{Ctx, Workload};
use crate::error::{CliError, Result, exit, kube_err};
use crate::math::{self, IntOrPercent};
use crate::status::{StatusReport, decide};
use crate::target::Target;
use crate::view::RolloutView;
use crate::view::verdict::PodSummary;
use crate::view::workload::Kind;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::json;

pub async fn pause(ctx: &Ctx, targets: &[Target], paused: bool) -> Result<i32> {
    for target in targets {
        if !target.kind.spec().pause {
            return Err(CliError::Usage(format!(
                "{target}: a {} has no pause switch (hold Pods back with `rollout partition` where it has one)",
                target.kind
            )));
        }
        let wl = Workload::locate(ctx, target).await?;
        let view = wl.view().await?;
        let verb = if paused { "paused" } else { "resumed" };
        if view.paused == paused {
            println!("{target} already {verb}");
            continue;
        }
        wl.merge_patch(&view.paused_patch(paused)).await?;
        tracing::info!(%target, paused, "patched");
        println!("{target} {verb}");
    }
    Ok(exit::OK)
}

fn require_partition(target: &Target, what: &str) -> Result<()> {
    if !target.kind.spec().partition {
        let with: Vec<&str> = Kind::ALL
            .into_iter()
            .filter(|k| k.spec().partition)
            .map(Kind::type_name)
            .collect();
        return Err(CliError::Usage(format!(
            "{what} needs a workload with a partition ({}); {target} is a {} without one",
            with.join(", "),
            target.kind
        )));
    }
    Ok(())
}

fn describe_partition(view: &RolloutView, p: &IntOrPercent) -> String {
    let kept = math::partition_pods(Some(p), view.replicas);
    format!(
        "{kept} of {} pods stay at the old revision, {} get the new one",
        view.replicas,
        view.replicas - kept
    )
}

/// `--subset` names a UnitedDeployment's subset; every other kind has one partition.
fn check_subset<'a>(target: &Target, subset: Option<&'a str>) -> Result<Option<&'a str>> {
    match (target.kind == Kind::UnitedDeployment, subset) {
        (true, Some(s)) => Ok(Some(s)),
        (true, None) => Err(CliError::Usage(format!(
            "{target}: a UnitedDeployment has one partition per subset: pass --subset NAME"
        ))),
        (false, Some(_)) => Err(CliError::Usage(format!(
            "--subset applies to a UnitedDeployment only; {target} is a {}",
            target.kind
        ))),
        (false, None) => Ok(None),
    }
}

/// Applies `change` to the partition of one subset of the UnitedDeployment `target`.
async fn subset_partition(
    ctx: &Ctx,
    target: &Target,
    name: &str,
    change: subset::Change<'_>,
) -> Result<subset::SubsetPlan> {
    let wl = Workload::locate(ctx, target).await?;
    let obj = wl.fetch_raw().await?;
    let plan = subset::plan(&obj, name, change).map_err(CliError::Usage)?;
    wl.merge_patch(&plan.patch).await?;
    tracing::info!(%target, subset = name, partition = plan.next, "patched");
    Ok(plan)
}

pub async fn partition(
    ctx: &Ctx,
    target: &Target,
    value: &IntOrPercent,
    subset: Option<&str>,
) -> Result<i32> {
    if let Some(name) = check_subset(target, subset)? {
        let p = subset_partition(ctx, target, name, subset::Change::Set(value)).await?;
        println!(
            "{target} subset {name} partition set to {} ({} of {} pods stay at the old revision)",
            p.next, p.next, p.replicas
        );
        return Ok(exit::OK);
    }
    require_partition(target, "rollout partition")?;
    let wl = Workload::locate(ctx, target).await?;
    let view = wl.view().await?;
    wl.merge_patch(&view.strategy_patch(json!({"partition": value.to_json()})))
        .await?;
    println!(
        "{target} partition set to {value} ({})",
        describe_partition(&view, value)
    );
    Ok(exit::OK)
}

/// The partition after one promotion step: the kept count minus a batch, never below 0.
pub fn next_partition(view: &RolloutView, full: bool, step: Option<&IntOrPercent>) -> (i64, i64) {
    let kept = math::partition_pods(view.partition.as_ref(), view.replicas);
    if full {
        return (kept, 0);
    }
    let batch = match step {
        Some(s) => s.scaled(view.replicas, true).max(1),
        None => view.max_unavailable_pods(),
    };
    (kept, (kept - batch).max(0))
}

/// The patch that moves the partition to `next` and resumes a paused rollout; kinds without a
/// pause switch (apps/v1 StatefulSet) would drop or refuse `paused`, so they get the partition only.
pub fn promote_patch(view: &RolloutView, kind: Kind, next: i64) -> serde_json::Value {
    let fields = if kind.spec().pause {
        json!({"partition": next, "paused": false})
    } else {
        json!({"partition": next})
    };
    view.strategy_patch(fields)
}

pub async fn promote(
    ctx: &Ctx,
    target: &Target,
    full: bool,
    step: Option<&IntOrPercent>,
    subset: Option<&str>,
) -> Result<i32> {
    if let Some(name) = check_subset(target, subset)? {
        let change = if full {
            subset::Change::Full
        } else {
            subset::Change::Step(step)
        };
        let p = subset_partition(ctx, target, name, change).await?;
        println!(
            "{target} subset {name} promoted: partition {} -> {} ({} of {} pods will run the new revision)",
            p.kept,
            p.next,
            p.replicas - p.next.min(p.replicas),
            p.replicas
        );
        return Ok(exit::OK);
    }
    require_partition(target, "rollout promote")?;
    let wl = Workload::locate(ctx, target).await?;
    let view = wl.view().await?;
    let (kept, next) = next_partition(&view, full, step);
    if kept == next && !view.paused {
        println!("{target}: nothing to promote (partition keeps {kept} pods, not paused)");
        return Ok(exit::OK);
    }
    let patch = promote_patch(&view, target.kind, next);
    wl.merge_patch(&patch).await?;
    let resumed = if view.paused { "; resumed" } else { "" };
    println!(
        "{target} promoted: partition {kept} -> {next} ({} of {} pods will run the new revision){resumed}",
        view.replicas - next,
        view.replicas
    );
    Ok(exit::OK)
}

/// The rollout reports of one kind's objects.
async fn list_kind(ctx: &Ctx, kind: Kind, all: bool) -> Result<Vec<StatusReport>> {
    let spec = kind.spec();
    let (ar, _) = ctx.resolve(spec.group, spec.plural).await?;
    let api: Api<DynamicObject> = if all || !spec.namespaced {
        Api::all_with(ctx.client.clone(), &ar)
    } else {
        Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &ar)
    };
    let items = api
        .list(&ListParams::default())
        .await
        .map_err(kube_err)?
        .items;
    let none = PodSummary::default();
    Ok(items
        .iter()
        .map(|o| {
            let v = RolloutView::from_json(&crate::ctx::typed_json(o, &ar));
            StatusReport::new(&v, &none, &decide(&v, &none))
        })
        .collect())
}

/// `rollout list [KIND]`: one kind, or every kind the cluster serves (names then read
/// `TYPE/NAME`, ready for the other commands).
pub async fn list(ctx: &Ctx, kind: Option<Kind>, all: bool, output: Output) -> Result<i32> {
    let kinds: Vec<Kind> = kind.map_or_else(|| Kind::ALL.to_vec(), |k| vec![k]);
    let mut rows: Vec<(String, StatusReport)> = Vec::new();
    for k in kinds {
        let reports = match list_kind(ctx, k, all).await {
            Ok(r) => r,
            // Every kind: one whose CRD is not installed has nothing to list.
            Err(CliError::NotInstalled { .. }) if kind.is_none() => continue,
            Err(e) => return Err(e),
        };
        for r in reports {
            let name = if kind.is_some() {
                r.name.clone()
            } else {
                format!("{}/{}", k.type_name(), r.name)
            };
            rows.push((name, r));
        }
    }
    if output != Output::Text {
        let reports: Vec<&StatusReport> = rows.iter().map(|(_, r)| r).collect();
        print_doc(output, &reports);
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        let what = kind.map_or_else(|| "workloads".to_string(), |k| format!("{k}s"));
        let scoped = all || kind.is_some_and(|k| !k.spec().namespaced);
        println!(
            "No {what} found{}.",
            if scoped { "" } else { " in this namespace" }
        );
        return Ok(exit::OK);
    }
    print!("{}", list_table(&rows));
    Ok(exit::OK)
}

/// The text table of `rollout list`, columns as wide as their longest value like kubectl's.
pub fn list_table(rows: &[(String, StatusReport)]) -> String {
    let ns_w = rows
        .iter()
        .map(|(_, r)| r.namespace.len())
        .max()
        .unwrap_or(0)
        .max(9);
    let name_w = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0).max(4);
    let mut out = format!(
        "{:<ns_w$}  {:<name_w$}  {:>8}  {:>7}  {:>5}  {:>9}  {:>6}  STATUS\n",
        "NAMESPACE", "NAME", "REPLICAS", "UPDATED", "READY", "PARTITION", "PAUSED"
    );
    for (name, r) in rows {
        out.push_str(&format!(
            "{:<ns_w$}  {:<name_w$}  {:>8}  {:>7}  {:>5}  {:>9}  {:>6}  {:?}\n",
            if r.namespace.is_empty() {
                "-"
            } else {
                &r.namespace
            },
            name,
            r.replicas,
            r.updated_replicas,
            r.updated_ready_replicas.unwrap_or(r.ready_replicas),
            r.partition.as_deref().unwrap_or("-"),
            r.paused,
            r.outcome
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(
        partition: serde_json::Value,
        max_unavailable: serde_json::Value,
        replicas: i64,
    ) -> RolloutView {
        RolloutView::from_json(&json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet", "metadata": {"name": "w"},
            "spec": {"replicas": replicas, "updateStrategy": {"rollingUpdate": {"partition": partition, "maxUnavailable": max_unavailable}}}
        }))
    }

    /// The live view's `P` and `rollout promote` send the same patch: resume where the kind has a
    /// pause switch, the partition alone where it has none (apps/v1 StatefulSet).
    #[test]
    fn promote_patch_resumes_only_kinds_with_a_pause_switch() {
        assert_eq!(
            promote_patch(&view(json!(2), json!(1), 3), Kind::CloneSet, 1),
            json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 1, "paused": false}}}})
        );
        let sts = RolloutView::from_json(&json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "w"},
            "spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}}
        }));
        assert_eq!(
            promote_patch(&sts, Kind::StatefulSet, 1),
            json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 1}}}})
        );
    }

    #[test]
    fn list_table_names_type_slash_name_and_dashes_cluster_scope() {
        let none = PodSummary::default();
        let report = |v: &RolloutView| StatusReport::new(v, &none, &decide(v, &none));
        let cs = RolloutView::from_json(&json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"replicas": 3}, "status": {"replicas": 3, "updatedReplicas": 3}
        }));
        let ss = RolloutView::from_json(&json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
            "metadata": {"name": "proxy"}, "spec": {}
        }));
        let rows = vec![
            ("cloneset/web".to_string(), report(&cs)),
            ("sidecarset/proxy".to_string(), report(&ss)),
        ];
        let table = list_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("NAMESPACE  NAME"), "{table}");
        assert!(lines[1].starts_with("shop       cloneset/web"), "{table}");
        assert!(
            lines[2].starts_with("-          sidecarset/proxy"),
            "{table}"
        );
    }

    #[test]
    fn promote_steps() {
        // Batch = maxUnavailable by default.
        assert_eq!(
            next_partition(&view(json!(8), json!(3), 10), false, None),
            (8, 5)
        );
        // Default maxUnavailable 20% of 10 = 2.
        assert_eq!(
            next_partition(&view(json!("80%"), json!(null), 10), false, None),
            (8, 6)
        );
        // --step as a percentage rounds up.
        assert_eq!(
            next_partition(
                &view(json!(8), json!(3), 10),
                false,
                Some(&IntOrPercent::Percent(25))
            ),
            (8, 5)
        );
        // Never below zero; --full goes straight to zero.
        assert_eq!(
            next_partition(&view(json!(1), json!(3), 10), false, None),
            (1, 0)
        );
        assert_eq!(
            next_partition(&view(json!(9), json!(1), 10), true, None),
            (9, 0)
        );
    }
}
