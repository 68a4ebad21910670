//! `scaledown T --pods a,b`: remove chosen Pods through the workload's own field and lower
//! `replicas` by as many, so the controller deletes exactly those Pods and creates none.
//! CloneSet: `scaleStrategy.podsToDelete` (kruise-tools' command). Advanced StatefulSet: the
//! Pods' ordinals go into `reserveOrdinals`, which keeps the other ordinals where they are.

use std::collections::BTreeSet;

use crate::ctx::{Ctx, Workload};
use crate::error::{CliError, Result, exit};
use crate::target::Target;
use crate::view::workload::{Kind, ordinal};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::ListParams;
use serde_json::{Value, json};

/// What the command will write.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub replicas: (i64, i64),
    /// The Pods to remove, in the order given.
    pub pods: Vec<String>,
    /// The JSON patch: guarded by the object's resourceVersion, so a concurrent change makes it
    /// fail instead of deleting the wrong Pods.
    pub patch: Value,
}

/// The plan for removing `wanted` from the workload `obj` whose Pods are `owned` (names).
pub fn plan(kind: Kind, obj: &Value, owned: &[String], wanted: &[String]) -> Result<Plan, String> {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let mut pods: Vec<String> = Vec::new();
    for p in wanted.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        if !pods.iter().any(|q| q == p) {
            pods.push(p.to_string());
        }
    }
    if pods.is_empty() {
        return Err("--pods names no Pod: give them as --pods NAME[,NAME...]".to_string());
    }
    let unknown: Vec<&str> = pods
        .iter()
        .filter(|p| !owned.contains(p))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "not Pods of {} {name}: {} (its Pods: {})",
            kind,
            unknown.join(", "),
            owned.join(", ")
        ));
    }
    let replicas = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    let n = i64::try_from(pods.len()).unwrap_or(i64::MAX);
    if n > replicas {
        return Err(format!(
            "{n} Pods named but {kind} {name} has replicas {replicas}"
        ));
    }
    let rv = obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    let mut ops = vec![
        json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}),
        json!({"op": "replace", "path": "/spec/replicas", "value": replicas - n}),
    ];
    match kind {
        Kind::CloneSet => {
            let pending: BTreeSet<&str> = obj["spec"]["scaleStrategy"]["podsToDelete"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let already: Vec<&str> = pods
                .iter()
                .map(String::as_str)
                .filter(|p| pending.contains(p))
                .collect();
            if !already.is_empty() {
                return Err(format!(
                    "already in spec.scaleStrategy.podsToDelete of {name}: {} (the controller is deleting them)",
                    already.join(", ")
                ));
            }
            let mut list: Vec<Value> = pending.iter().map(|p| json!(p)).collect();
            list.extend(pods.iter().map(|p| json!(p)));
            ops.push(if obj["spec"]["scaleStrategy"].is_object() {
                json!({"op": "add", "path": "/spec/scaleStrategy/podsToDelete", "value": list})
            } else {
                json!({"op": "add", "path": "/spec/scaleStrategy", "value": {"podsToDelete": list}})
            });
        }
        Kind::AdvancedStatefulSet => {
            let mut reserved: Vec<Value> = obj["spec"]["reserveOrdinals"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for p in &pods {
                let o = p
                    .strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix('-'))
                    .and_then(|_| ordinal(p))
                    .ok_or_else(|| format!("{p} is not named {name}-ORDINAL"))?;
                reserved.push(json!(o));
            }
            ops.push(json!({"op": "add", "path": "/spec/reserveOrdinals", "value": reserved}));
        }
        other => return Err(unsupported(other)),
    }
    Ok(Plan {
        replicas: (replicas, replicas - n),
        pods,
        patch: Value::Array(ops),
    })
}

fn unsupported(kind: Kind) -> String {
    let why = match kind {
        Kind::AdvancedDaemonSet | Kind::DaemonSet => " (it runs one Pod per node)",
        _ => "",
    };
    format!(
        "scaledown removes chosen Pods of a CloneSet (podsToDelete) or an Advanced StatefulSet (reserveOrdinals); a {kind} has no such field{why}"
    )
}

pub async fn run(ctx: &Ctx, target: &Target, pods: &[String], dry_run: bool) -> Result<i32> {
    if !matches!(target.kind, Kind::CloneSet | Kind::AdvancedStatefulSet) {
        return Err(CliError::Usage(unsupported(target.kind)));
    }
    let wl = Workload::locate(ctx, target).await?;
    let obj = wl.fetch_raw().await?;
    let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
    let view = wl.view().await?;
    let list = wl
        .pods_api(&ctx.client)
        .list(&ListParams::default().labels(view.list_selector()?))
        .await
        .map_err(|e| CliError::from_kube(e, Some(("Pod", "", &wl.namespace))))?;
    let mut owned: Vec<String> = list
        .items
        .iter()
        .filter(|p| controlled_by(p, uid))
        .map(ResourceExt::name_any)
        .collect();
    owned.sort();
    let plan = plan(target.kind, &obj, &owned, pods).map_err(CliError::Usage)?;
    println!(
        "{target}: replicas {} -> {}, deleting {}",
        plan.replicas.0,
        plan.replicas.1,
        plan.pods.join(", ")
    );
    if dry_run {
        println!("(dry run: nothing changed)");
        return Ok(exit::OK);
    }
    wl.json_patch(plan.patch).await?;
    println!("{target} scaled down");
    Ok(exit::OK)
}

fn controlled_by(pod: &Pod, uid: &str) -> bool {
    pod.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn cloneset_appends_to_pods_to_delete_and_lowers_replicas() {
        let cs = json!({"metadata": {"name": "web", "resourceVersion": "7"},
            "spec": {"replicas": 4, "scaleStrategy": {"podsToDelete": ["web-x"]}}});
        let owned = names(&["web-a", "web-b", "web-c", "web-x"]);
        let p = plan(
            Kind::CloneSet,
            &cs,
            &owned,
            &names(&["web-b", "web-c", "web-b"]),
        )
        .expect("plan");
        assert_eq!(p.replicas, (4, 2));
        assert_eq!(p.pods, names(&["web-b", "web-c"]));
        assert_eq!(
            p.patch,
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "replace", "path": "/spec/replicas", "value": 2},
                {"op": "add", "path": "/spec/scaleStrategy/podsToDelete", "value": ["web-x", "web-b", "web-c"]}
            ])
        );
        // No scaleStrategy yet: the object is added whole.
        let bare = json!({"metadata": {"name": "web"}, "spec": {"replicas": 2}});
        let p = plan(Kind::CloneSet, &bare, &owned, &names(&["web-a"])).expect("plan");
        assert_eq!(
            p.patch[2],
            json!({"op": "add", "path": "/spec/scaleStrategy", "value": {"podsToDelete": ["web-a"]}})
        );
    }

    #[test]
    fn advanced_statefulset_reserves_the_ordinals() {
        let sts = json!({"metadata": {"name": "web", "resourceVersion": "3"},
            "spec": {"replicas": 3, "reserveOrdinals": [5]}});
        let owned = names(&["web-0", "web-1", "web-2"]);
        let p = plan(Kind::AdvancedStatefulSet, &sts, &owned, &names(&["web-1"])).expect("plan");
        assert_eq!(p.replicas, (3, 2));
        assert_eq!(
            p.patch[2],
            json!({"op": "add", "path": "/spec/reserveOrdinals", "value": [5, 1]})
        );
    }

    #[test]
    fn refusals_name_the_pods_and_the_fix() {
        let cs = json!({"metadata": {"name": "web"},
            "spec": {"replicas": 2, "scaleStrategy": {"podsToDelete": ["web-a"]}}});
        let owned = names(&["web-a", "web-b"]);
        let e = plan(Kind::CloneSet, &cs, &owned, &names(&["nope"])).unwrap_err();
        assert!(
            e.contains("not Pods of") && e.contains("nope") && e.contains("web-a, web-b"),
            "{e}"
        );
        let e = plan(Kind::CloneSet, &cs, &owned, &names(&["web-a"])).unwrap_err();
        assert!(
            e.contains("already in spec.scaleStrategy.podsToDelete"),
            "{e}"
        );
        let e = plan(Kind::CloneSet, &cs, &owned, &names(&[" ", ""])).unwrap_err();
        assert!(e.contains("--pods NAME"), "{e}");
        let e = plan(Kind::AdvancedDaemonSet, &cs, &owned, &names(&["web-b"])).unwrap_err();
        assert!(e.contains("one Pod per node"), "{e}");
        let one = json!({"metadata": {"name": "web"}, "spec": {"replicas": 1}});
        let e = plan(Kind::CloneSet, &one, &owned, &names(&["web-a", "web-b"])).unwrap_err();
        assert!(e.contains("replicas 1"), "{e}");
    }
}
