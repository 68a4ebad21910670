//! `rollout restart`: CloneSets restart containers in place, batch by batch, through
//! ContainerRecreateRequests; Deployments get kubectl's restartedAt annotation.

use crate::cli::RestartArgs;
use crate::cmd::crr::CrrClient;
use crate::ctx::{Ctx, Workload};
use crate::error::{CliError, Result, exit, kube_err};
use crate::view::PodView;
use crate::view::workload::{self, PodOrder, Restart};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys::k8s;
use kube::api::{Api, ListParams};
use serde_json::json;

/// Splits pods into batches of `size` in the kind's order. Unready first (CloneSet): pods
/// already down are restarted first, so the service loses as little capacity as possible.
/// Highest ordinal first (Advanced StatefulSet), as its rolling update goes. By node (Advanced
/// DaemonSet): each batch is a set of nodes, at most maxUnavailable of them at once.
pub fn plan_batches(mut pods: Vec<PodView>, size: usize, order: PodOrder) -> Vec<Vec<PodView>> {
    match order {
        PodOrder::UnreadyFirst => {
            pods.sort_by(|a, b| a.ready.cmp(&b.ready).then_with(|| a.name.cmp(&b.name)))
        }
        PodOrder::OrdinalDescending => {
            workload::by_ordinal(&mut pods);
            pods.reverse();
        }
        PodOrder::ByNode => workload::by_node(&mut pods),
    }
    pods.chunks(size.max(1)).map(<[PodView]>::to_vec).collect()
}

pub async fn run(ctx: &Ctx, args: &RestartArgs) -> Result<i32> {
    let wl = Workload::locate(ctx, &args.target).await?;
    let view = wl.view().await?;
    let order = match view.kind.spec().restart {
        Restart::InPlace(order) => order,
        Restart::Unsupported => {
            return Err(CliError::Usage(format!(
                "{}: a {} has no Pods of its own to restart; restart the workloads it injects into",
                args.target, view.kind
            )));
        }
        Restart::TemplateAnnotation => {
            let now = jiff::Timestamp::now().to_string();
            let patch = json!({"spec": {"template": {"metadata": {"annotations": {k8s::KUBECTL_RESTARTED_AT_ANNOTATION: now}}}}});
            wl.merge_patch(&patch).await?;
            println!("{} restarted (rolling replacement)", args.target);
            return Ok(exit::OK);
        }
    };
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &wl.namespace);
    let list = pods_api
        .list(&ListParams::default().labels(view.list_selector()?))
        .await
        .map_err(kube_err)?
        .items;
    let owned: Vec<(PodView, Pod)> = list
        .into_iter()
        .filter(|p| {
            p.metadata
                .owner_references
                .as_ref()
                .is_some_and(|o| o.iter().any(|r| r.uid == view.uid))
        })
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| (PodView::from_pod(&p), p))
        .collect();
    if owned.is_empty() {
        println!("{}: no pods to restart", args.target);
        return Ok(exit::OK);
    }
    let size = match &args.batch {
        Some(b) => b.scaled(view.replicas, true).max(1),
        None => view.max_unavailable_pods(),
    };
    let unready = owned.iter().filter(|(v, _)| !v.ready).count() as i64;
    let total = owned.len();
    let by_name: std::collections::BTreeMap<String, Pod> = owned
        .iter()
        .map(|(v, p)| (v.name.clone(), p.clone()))
        .collect();
    let batches = plan_batches(
        owned.into_iter().map(|(v, _)| v).collect(),
        size as usize,
        order,
    );
    println!(
        "{}: restarting containers in place on {total} pods, {size} at a time ({} batches{})",
        args.target,
        batches.len(),
        if unready > 0 {
            format!("; {unready} pods not ready now")
        } else {
            String::new()
        }
    );
    let crr = CrrClient::new(ctx, &wl.namespace).await?;
    let mut done = 0usize;
    for (i, batch) in batches.iter().enumerate() {
        let mut names = Vec::new();
        for pv in batch {
            let Some(pod) = by_name.get(&pv.name) else {
                continue;
            };
            names.push(crr.create(pod, &args.containers, false).await?);
        }
        let pods_of: Vec<String> = batch.iter().map(|p| p.name.clone()).collect();
        println!("batch {}/{}: {}", i + 1, batches.len(), pods_of.join(", "));
        let results = crr
            .wait_all(
                &names,
                args.timeout,
                |n, s| tracing::debug!(crr = n, state = %s.line(), "crr progress"),
            )
            .await?;
        let failed: Vec<String> = results
            .iter()
            .filter_map(|(n, r)| r.as_ref().err().map(|e| format!("{n}: {e}")))
            .collect();
        if !failed.is_empty() {
            return Err(CliError::Failed(format!(
                "batch {} failed, stopping after {done} of {total} pods: {}",
                i + 1,
                failed.join("; ")
            )));
        }
        done += batch.len();
        println!(
            "batch {}/{} done ({done}/{total} pods)",
            i + 1,
            batches.len()
        );
    }
    println!("{}: all {total} pods restarted in place", args.target);
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_put_unready_first() {
        let pod = |n: &str, ready: bool| PodView {
            name: n.into(),
            ready,
            ..Default::default()
        };
        let b = plan_batches(
            vec![
                pod("a", true),
                pod("b", false),
                pod("c", true),
                pod("d", true),
                pod("e", true),
            ],
            2,
            PodOrder::UnreadyFirst,
        );
        let names: Vec<Vec<&str>> = b
            .iter()
            .map(|x| x.iter().map(|p| p.name.as_str()).collect())
            .collect();
        assert_eq!(names, vec![vec!["b", "a"], vec!["c", "d"], vec!["e"]]);
        assert_eq!(
            plan_batches(vec![pod("a", true)], 0, PodOrder::UnreadyFirst).len(),
            1
        );
    }

    #[test]
    fn asts_restarts_highest_ordinal_first_and_ads_node_by_node() {
        let pod = |n: &str, node: &str| PodView {
            name: n.into(),
            node: node.into(),
            ready: true,
            ..Default::default()
        };
        let names = |b: Vec<Vec<PodView>>| -> Vec<Vec<String>> {
            b.iter()
                .map(|x| x.iter().map(|p| p.name.clone()).collect())
                .collect()
        };
        let sts = vec![
            pod("db-0", ""),
            pod("db-10", ""),
            pod("db-2", ""),
            pod("db-1", ""),
        ];
        assert_eq!(
            names(plan_batches(sts, 1, PodOrder::OrdinalDescending)),
            [["db-10"], ["db-2"], ["db-1"], ["db-0"]]
        );
        let ds = vec![
            pod("agent-x", "node-c"),
            pod("agent-y", "node-a"),
            pod("agent-z", "node-b"),
        ];
        assert_eq!(
            names(plan_batches(ds, 2, PodOrder::ByNode)),
            [vec!["agent-y", "agent-z"], vec!["agent-x"]]
        );
    }
}
