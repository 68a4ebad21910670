//! `rollout partition|promote ud/NAME --subset S`: a UnitedDeployment keeps one partition per
//! subset (`spec.updateStrategy.manualUpdate.partitions`, applied when the type is `Manual`),
//! which the controller passes down to that subset's workload.

use serde_json::{Value, json};

use crate::math::{self, IntOrPercent};

/// What a partition change on one subset does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubsetPlan {
    /// The subset's Pods now (from the status).
    pub replicas: i64,
    /// The subset's partition now.
    pub kept: i64,
    /// The partition it gets.
    pub next: i64,
    /// The merge patch that sets it (the other subsets' partitions are kept).
    pub patch: Value,
}

/// How the partition of the subset changes.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    /// `rollout partition`: to this count or share of the subset's Pods.
    Set(&'a IntOrPercent),
    /// `rollout promote --full`: to 0.
    Full,
    /// `rollout promote [--step N]`: down by one batch (the subset workload's maxUnavailable
    /// when no step is given).
    Step(Option<&'a IntOrPercent>),
}

fn subset_names(obj: &Value) -> Vec<&str> {
    obj.pointer("/spec/topology/subsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("name").and_then(Value::as_str))
        .collect()
}

/// The subset's Pods as the status counts them: v1beta1's `subsetStatuses[].replicas` or
/// v1alpha1's `subsetReplicas`.
fn subset_replicas(obj: &Value, subset: &str) -> i64 {
    let beta = obj
        .pointer("/status/subsetStatuses")
        .and_then(Value::as_array)
        .and_then(|l| {
            l.iter()
                .find(|e| e.get("name").and_then(Value::as_str) == Some(subset))
        })
        .and_then(|e| e.get("replicas"))
        .and_then(Value::as_i64);
    let alpha = || {
        obj.pointer("/status/subsetReplicas")
            .and_then(|m| m.get(subset))
            .and_then(Value::as_i64)
    };
    beta.or_else(alpha).unwrap_or(0)
}

/// Pods the subset workload updates at once: its template's `maxUnavailable` (CloneSet default
/// 20 %, StatefulSets 1), at least one.
fn batch(obj: &Value, replicas: i64) -> i64 {
    let templates = obj.pointer("/spec/template");
    let (key, default) = if templates.and_then(|t| t.get("cloneSetTemplate")).is_some() {
        ("cloneSetTemplate", IntOrPercent::Percent(20))
    } else if templates
        .and_then(|t| t.get("advancedStatefulSetTemplate"))
        .is_some()
    {
        ("advancedStatefulSetTemplate", IntOrPercent::Int(1))
    } else {
        ("statefulSetTemplate", IntOrPercent::Int(1))
    };
    let max = templates
        .and_then(|t| t.get(key))
        // v1beta1's CloneSet (and the StatefulSets) nest it; a v1alpha1 CloneSet has it flat.
        .and_then(|t| {
            t.pointer("/spec/updateStrategy/rollingUpdate/maxUnavailable")
                .or_else(|| t.pointer("/spec/updateStrategy/maxUnavailable"))
        })
        .and_then(|v| match v {
            Value::Number(n) => n.as_i64().map(IntOrPercent::Int),
            Value::String(s) => s.parse().ok(),
            _ => None,
        })
        .unwrap_or(default);
    max.scaled(replicas, true).max(1)
}

/// The plan for `subset` of the UnitedDeployment `obj`, or why there is none (a usage error).
pub fn plan(obj: &Value, subset: &str, change: Change<'_>) -> Result<SubsetPlan, String> {
    let names = subset_names(obj);
    if !names.contains(&subset) {
        return Err(format!(
            "--subset {subset:?}: no such subset (the subsets are {})",
            names.join(", ")
        ));
    }
    if obj.pointer("/spec/template/deploymentTemplate").is_some() {
        return Err(
            "a Deployment has no partition: its subsets update as their Deployments roll".into(),
        );
    }
    let replicas = subset_replicas(obj, subset);
    let kept = obj
        .pointer("/spec/updateStrategy/manualUpdate/partitions")
        .and_then(|m| m.get(subset))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let next = match change {
        Change::Set(p) => math::partition_pods(Some(p), replicas).max(0),
        Change::Full => 0,
        Change::Step(step) => {
            let b = step.map_or_else(|| batch(obj, replicas), |s| s.scaled(replicas, true).max(1));
            (kept - b).max(0)
        }
    };
    let patch = json!({"spec": {"updateStrategy": {
        "type": kruise_api::apps::v1alpha1::UD_UPDATE_MANUAL,
        "manualUpdate": {"partitions": {subset: next}}}}});
    Ok(SubsetPlan {
        replicas,
        kept,
        next,
        patch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ud(template: Value, status: Value) -> Value {
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "UnitedDeployment",
            "metadata": {"name": "web"},
            "spec": {"replicas": 10, "template": template,
                "topology": {"subsets": [{"name": "a"}, {"name": "b"}]},
                "updateStrategy": {"type": "Manual", "manualUpdate": {"partitions": {"a": 1, "b": 4}}}},
            "status": status})
    }

    fn cloneset(max_unavailable: Option<Value>) -> Value {
        let mut t =
            json!({"cloneSetTemplate": {"spec": {"updateStrategy": {"rollingUpdate": {}}}}});
        if let Some(m) = max_unavailable {
            t["cloneSetTemplate"]["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = m;
        }
        t
    }

    fn beta_status() -> Value {
        json!({"subsetStatuses": [{"name": "a", "replicas": 2}, {"name": "b", "replicas": 8}]})
    }

    #[test]
    fn set_scales_a_percentage_to_the_subsets_pods_and_keeps_the_others() {
        let obj = ud(cloneset(None), beta_status());
        let p = plan(&obj, "b", Change::Set(&IntOrPercent::Percent(50))).expect("plan");
        assert_eq!((p.replicas, p.kept, p.next), (8, 4, 4));
        let p = plan(&obj, "b", Change::Set(&IntOrPercent::Int(6))).expect("plan");
        assert_eq!(p.next, 6);
        assert_eq!(
            p.patch,
            json!({"spec": {"updateStrategy": {"type": "Manual",
                "manualUpdate": {"partitions": {"b": 6}}}}}),
            "a merge patch: subset a's partition stays"
        );
    }

    #[test]
    fn promote_steps_by_the_workloads_max_unavailable_or_the_given_step() {
        // CloneSet default 20 % of 8 → 2 (rounded up).
        let obj = ud(cloneset(None), beta_status());
        let p = plan(&obj, "b", Change::Step(None)).expect("plan");
        assert_eq!((p.kept, p.next), (4, 2));
        let obj = ud(cloneset(Some(json!(3))), beta_status());
        assert_eq!(plan(&obj, "b", Change::Step(None)).expect("plan").next, 1);
        let step = IntOrPercent::Int(10);
        assert_eq!(
            plan(&obj, "b", Change::Step(Some(&step)))
                .expect("plan")
                .next,
            0
        );
        assert_eq!(plan(&obj, "a", Change::Full).expect("plan").next, 0);
    }

    #[test]
    fn reads_v1alpha1_subset_replicas_too() {
        let obj = ud(cloneset(None), json!({"subsetReplicas": {"a": 2, "b": 6}}));
        let p = plan(&obj, "b", Change::Set(&IntOrPercent::Percent(50))).expect("plan");
        assert_eq!((p.replicas, p.next), (6, 3));
    }

    #[test]
    fn an_unknown_subset_or_a_deployment_template_is_refused() {
        let obj = ud(cloneset(None), beta_status());
        let e = plan(&obj, "zz", Change::Full).expect_err("unknown");
        assert!(e.contains("\"zz\"") && e.contains("a, b"), "{e}");
        let obj = ud(json!({"deploymentTemplate": {"spec": {}}}), beta_status());
        let e = plan(&obj, "a", Change::Full).expect_err("deployment");
        assert!(e.contains("Deployment has no partition"), "{e}");
    }
}
