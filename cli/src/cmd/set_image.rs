//! `set image`: change container images, saying first whether pods will be updated in place.

use crate::ctx::{Ctx, Workload};
use crate::error::{CliError, Result, exit};
use crate::math;
use crate::target::Target;
use crate::view::RolloutView;
use serde_json::{Value, json};

/// Parses `CONTAINER=IMAGE` pairs into (index, name, old, new) against the template.
pub fn plan(
    view: &RolloutView,
    pairs: &[String],
) -> std::result::Result<Vec<(usize, String, String, String)>, String> {
    let mut out: Vec<(usize, String, String, String)> = Vec::new();
    for pair in pairs {
        let (name, image) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?} is not CONTAINER=IMAGE"))?;
        if image.is_empty() {
            return Err(format!("{pair:?} has an empty image"));
        }
        let matched: Vec<usize> = view
            .images
            .iter()
            .enumerate()
            .filter(|(_, (n, _))| name == "*" || n == name)
            .map(|(i, _)| i)
            .collect();
        if matched.is_empty() {
            let names: Vec<&str> = view.images.iter().map(|(n, _)| n.as_str()).collect();
            return Err(format!(
                "no container {name:?} in the template (containers: {})",
                names.join(", ")
            ));
        }
        for i in matched {
            let (n, old) = &view.images[i];
            out.retain(|(j, ..)| *j != i);
            out.push((i, n.clone(), old.clone(), image.to_string()));
        }
    }
    out.sort_by_key(|(i, ..)| *i);
    Ok(out)
}

/// One sentence on how the change will roll out under the workload's update policy. Only
/// images change here, which the in-place engine can always apply without recreating the pod.
pub fn explain(view: &RolloutView, changes: usize) -> String {
    if changes == 0 {
        return "no image changes: nothing will roll out".to_string();
    }
    with_notes(view, (view.kind.spec().image_change)(view))
}

/// `how` a template change rolls out, followed by what holds Pods back from it (OnDelete, the
/// partition, a pause); shared by every `set` command.
pub fn with_notes(view: &RolloutView, how: String) -> String {
    let mut notes = Vec::new();
    if view.on_delete {
        notes.push(view.kind.spec().on_delete_note.to_string());
    }
    let kept = math::partition_pods(view.partition.as_ref(), view.replicas);
    if kept > 0 {
        notes.push(format!(
            "partition keeps {kept} of {} pods at the old revision",
            view.replicas
        ));
    }
    if view.paused {
        notes.push("the rollout is paused: nothing changes until `rollout resume`".to_string());
    }
    if notes.is_empty() {
        how
    } else {
        format!("{how}; {}", notes.join("; "))
    }
}

pub async fn run(ctx: &Ctx, target: &Target, pairs: &[String], dry_run: bool) -> Result<i32> {
    let wl = Workload::locate(ctx, target).await?;
    let view = wl.view().await?;
    let changes: Vec<_> = plan(&view, pairs)
        .map_err(CliError::Usage)?
        .into_iter()
        .filter(|(_, _, old, new)| old != new)
        .collect();
    for (_, name, old, new) in &changes {
        println!("{target}: container {name}: {old} -> {new}");
    }
    println!("{}", explain(&view, changes.len()));
    if dry_run || changes.is_empty() {
        if dry_run {
            println!("(dry run: nothing changed)");
        }
        return Ok(exit::OK);
    }
    // `test` guards against the template changing between our read and the patch.
    let mut ops = Vec::new();
    for (i, name, _, new) in &changes {
        let at = target.kind.spec().containers_path;
        ops.push(json!({"op": "test", "path": format!("{at}/{i}/name"), "value": name}));
        ops.push(json!({"op": "replace", "path": format!("{at}/{i}/image"), "value": new}));
    }
    wl.json_patch(Value::Array(ops)).await?;
    println!("{target} image updated");
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cs(policy: &str, extra: Value) -> RolloutView {
        let mut ru = json!({"podUpdatePolicy": policy});
        if let (Some(r), Some(e)) = (ru.as_object_mut(), extra.as_object()) {
            r.extend(e.clone());
        }
        RolloutView::from_json(&json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet", "metadata": {"name": "w"},
            "spec": {"replicas": 4, "updateStrategy": {"rollingUpdate": ru},
                     "template": {"spec": {"containers": [{"name": "app", "image": "nginx:1"}, {"name": "side", "image": "busybox:1"}]}}}
        }))
    }

    #[test]
    fn plan_pairs() {
        let v = cs("InPlaceIfPossible", json!({}));
        let p = plan(&v, &["side=busybox:2".into()]).unwrap();
        assert_eq!(
            p,
            vec![(1, "side".into(), "busybox:1".into(), "busybox:2".into())]
        );
        assert_eq!(plan(&v, &["*=x:1".into()]).unwrap().len(), 2);
        assert!(
            plan(&v, &["nope=x".into()])
                .unwrap_err()
                .contains("containers: app, side")
        );
        assert!(plan(&v, &["app".into()]).is_err());
    }

    #[test]
    fn explanations() {
        assert!(explain(&cs("InPlaceIfPossible", json!({})), 1).contains("IN PLACE"));
        assert!(
            explain(
                &cs(
                    "InPlaceOnly",
                    json!({"inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}})
                ),
                1
            )
            .contains("10s grace")
        );
        assert!(explain(&cs("ReCreate", json!({})), 1).contains("RECREATED"));
        // The other kinds: in place where their switch says so, recreated where it does not.
        let obj = |api: &str, kind: &str, strategy: Value| {
            RolloutView::from_json(&json!({
                "apiVersion": api, "kind": kind, "metadata": {"name": "w"},
                "spec": {"replicas": 3, "updateStrategy": strategy,
                         "template": {"spec": {"containers": [{"name": "app", "image": "nginx:1"}]}},
                         "containers": [{"name": "proxy", "image": "envoy:1"}]},
                "status": {"desiredNumberScheduled": 4, "matchedPods": 5}
            }))
        };
        let asts = obj(
            "apps.kruise.io/v1beta1",
            "StatefulSet",
            json!({"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "partition": 1}}),
        );
        let e = explain(&asts, 1);
        assert!(
            e.contains("IN PLACE")
                && e.contains("highest ordinal first")
                && e.contains("keeps 1 of 3"),
            "{e}"
        );
        let ads = obj(
            "apps.kruise.io/v1alpha1",
            "DaemonSet",
            json!({"rollingUpdate": {"rollingUpdateType": "InPlaceIfPossible"}}),
        );
        assert!(
            explain(&ads, 1).contains("IN PLACE"),
            "{}",
            explain(&ads, 1)
        );
        let ads_std = obj(
            "apps.kruise.io/v1alpha1",
            "DaemonSet",
            json!({"rollingUpdate": {"rollingUpdateType": "Surging"}}),
        );
        assert!(explain(&ads_std, 1).contains("RECREATED (rollingUpdateType Surging"));
        let sts = obj("apps/v1", "StatefulSet", json!({"type": "RollingUpdate"}));
        assert!(explain(&sts, 1).contains("RECREATED (StatefulSets replace"));
        let sc = obj(
            "apps.kruise.io/v1alpha1",
            "SidecarSet",
            json!({"partition": 2}),
        );
        assert_eq!(
            sc.images,
            vec![("proxy".to_string(), "envoy:1".to_string())]
        );
        let e = explain(&sc, 1);
        assert!(
            e.contains("sidecar updated IN PLACE") && e.contains("keeps 2 of 5"),
            "{e}"
        );
        let frozen = obj(
            "apps.kruise.io/v1alpha1",
            "SidecarSet",
            json!({"type": "NotUpdate"}),
        );
        assert!(explain(&frozen, 1).contains("NotUpdate: running pods keep their sidecar"));
        let e = explain(
            &cs("InPlaceIfPossible", json!({"partition": 2, "paused": true})),
            1,
        );
        assert!(
            e.contains("partition keeps 2 of 4") && e.contains("paused"),
            "{e}"
        );
    }
}
