//! `distribution status NAME`: where a ResourceDistribution landed and where it did not, one row
//! per namespace. The rows come from the controller's own pure plan (which namespaces the
//! targets match, what the copy there looks like) over the live Namespaces and the same-named
//! objects, with the failures the distribution's status records laid over them, so the view
//! says what the manager would do next as well as what it last reported.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kruise_api::apps::v1alpha1::{
    DistributedResource, ResourceDistribution, ResourceDistributionConditionType as ConditionType,
    resource_hash,
};
use kruise_api::keys;
use kruise_manager::resourcedistribution::plan::{Distributor, NamespaceInfo, Step, plan};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::ApiResource;
use serde::Serialize;
use serde_json::Value;

use crate::cli::Output;
use crate::ctx::Ctx;
use crate::error::{CliError, Result, exit};

/// One namespace's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    pub namespace: String,
    /// `distributed`, `pending`, `out-of-date`, `conflict`, `namespace-missing`, `failed`,
    /// `removing`.
    pub state: &'static str,
    pub detail: String,
    /// Whether the targets match the namespace (a `removing` row is not targeted).
    pub targeted: bool,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub name: String,
    pub kind: String,
    pub resource: String,
    pub desired: i32,
    pub succeeded: i32,
    pub failed: i32,
    pub namespaces: Vec<Row>,
}

impl Report {
    /// Every targeted namespace holds the current copy.
    pub fn complete(&self) -> bool {
        self.namespaces
            .iter()
            .all(|r| r.targeted && r.state == "distributed")
    }
}

/// The rows of `rd` (pure): plan over `namespaces` and the same-named objects, then the
/// failures of the last reconcile from the status.
pub fn report(
    rd: &ResourceDistribution,
    namespaces: &[NamespaceInfo],
    existing: &BTreeMap<String, Value>,
) -> std::result::Result<Report, kruise_api::apps::v1alpha1::ResourceError> {
    let res = DistributedResource::parse(&rd.spec.resource)?;
    let hash = resource_hash(&rd.spec.resource);
    let name = rd.name_any();
    let uid = rd.metadata.uid.clone().unwrap_or_default();
    let d = Distributor {
        name: &name,
        uid: &uid,
        resource: &rd.spec.resource,
        hash: &hash,
    };
    let status = rd.status.clone().unwrap_or_default();
    let mut failures: BTreeMap<&str, String> = BTreeMap::new();
    for c in &status.conditions {
        let retried = ConditionType::parse(&c.type_).is_some_and(ConditionType::retried);
        if retried && c.status == keys::k8s::CONDITION_TRUE {
            for ns in &c.failed_namespaces {
                failures.insert(ns, format!("{}: {}", c.type_, c.reason));
            }
        }
    }
    let short = &hash[..hash.len().min(12)];
    let rows = plan(&d, &rd.spec.targets, namespaces, existing)
        .into_iter()
        .map(|s| {
            let (state, detail) = match (&s.step, failures.get(s.namespace.as_str())) {
                (Step::Keep, _) => ("distributed", format!("hash {short}")),
                (Step::Conflict, _) => (
                    "conflict",
                    format!(
                        "a {} {} not owned by this distribution is there; it is never overwritten",
                        res.kind, res.name
                    ),
                ),
                (Step::NamespaceMissing, _) => (
                    "namespace-missing",
                    keys::RD_NAMESPACE_NOT_EXISTS_MESSAGE.to_owned(),
                ),
                (_, Some(f)) => ("failed", f.clone()),
                (Step::Create(_), None) => ("pending", "no copy yet".to_owned()),
                (Step::Update(_), None) => (
                    "out-of-date",
                    "the copy differs from the resource".to_owned(),
                ),
                (Step::Delete, None) => (
                    "removing",
                    "no longer targeted; the copy will be deleted".to_owned(),
                ),
            };
            Row {
                namespace: s.namespace,
                state,
                detail,
                targeted: s.targeted,
            }
        })
        .collect();
    Ok(Report {
        name,
        kind: res.kind,
        resource: res.name,
        desired: status.desired,
        succeeded: status.succeeded,
        failed: status.failed,
        namespaces: rows,
    })
}

/// The report as a table.
pub fn render(r: &Report) -> String {
    let mut out = format!(
        "ResourceDistribution {}: {} {} in {} of {} namespaces ({} failed)\n",
        r.name, r.kind, r.resource, r.succeeded, r.desired, r.failed
    );
    let w = r
        .namespaces
        .iter()
        .map(|n| n.namespace.len())
        .max()
        .unwrap_or(0)
        .max("NAMESPACE".len());
    out.push_str(&format!("{:<w$}  {:<17}  DETAIL\n", "NAMESPACE", "STATE"));
    for n in &r.namespaces {
        out.push_str(&format!(
            "{:<w$}  {:<17}  {}\n",
            n.namespace, n.state, n.detail
        ));
    }
    if r.namespaces.is_empty() {
        out.push_str("(no namespace is targeted)\n");
    }
    out
}

/// `kubectl kruise distribution status NAME`: exit 0 when every targeted namespace holds the
/// current copy, 1 otherwise.
pub async fn status(ctx: &Ctx, name: &str, output: Output) -> Result<i32> {
    let api: Api<ResourceDistribution> = Api::all(ctx.client.clone());
    let rd = api
        .get(name)
        .await
        .map_err(|e| CliError::from_kube(e, Some((keys::RD_KIND, name, ""))))?;
    let res = DistributedResource::parse(&rd.spec.resource)
        .map_err(|e| CliError::Failed(format!("spec.resource: {e}")))?;
    let namespaces: Vec<NamespaceInfo> = Api::<Namespace>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await
        .map_err(crate::error::kube_err)?
        .items
        .into_iter()
        .map(|n| NamespaceInfo {
            name: n.name_any(),
            labels: n.labels().clone(),
            terminating: n.metadata.deletion_timestamp.is_some(),
        })
        .collect();
    let ar = if res.kind == keys::k8s::CONFIGMAP_KIND {
        ApiResource::erase::<ConfigMap>(&())
    } else {
        ApiResource::erase::<Secret>(&())
    };
    let existing: BTreeMap<String, Value> = Api::<DynamicObject>::all_with(ctx.client.clone(), &ar)
        .list(&ListParams::default().fields(&format!("metadata.name={}", res.name)))
        .await
        .map_err(crate::error::kube_err)?
        .items
        .into_iter()
        .filter_map(|o| {
            let ns = o.metadata.namespace.clone()?;
            serde_json::to_value(o).ok().map(|v| (ns, v))
        })
        .collect();
    let r = report(&rd, &namespaces, &existing)
        .map_err(|e| CliError::Failed(format!("spec.resource: {e}")))?;
    match output {
        Output::Text => print!("{}", render(&r)),
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(&r).map_err(|e| CliError::Failed(e.to_string()))?
        ),
        Output::Yaml => print!(
            "{}",
            serde_saphyr::to_string(&r).map_err(|e| CliError::Failed(e.to_string()))?
        ),
    }
    Ok(if r.complete() { exit::OK } else { exit::FAILED })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rd(status: Value) -> ResourceDistribution {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "ResourceDistribution",
            "metadata": {"name": "rd", "uid": "u1"},
            "spec": {"resource": {"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "s"}, "data": {"k": "dg=="}},
                "targets": {"includedNamespaces": {"list": [
                    {"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "gone"}]}}},
            "status": status,
        }))
        .expect("rd")
    }

    fn ns(name: &str) -> NamespaceInfo {
        NamespaceInfo {
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn rows_say_where_it_landed_and_why_not() {
        let d = rd(
            json!({"desired": 4, "succeeded": 1, "failed": 3, "conditions": [
            {"type": "CreateResourceFailed", "status": "True", "reason": "quota exceeded",
             "failedNamespace": ["b"]}]}),
        );
        let hash = resource_hash(&d.spec.resource);
        let dist = Distributor {
            name: "rd",
            uid: "u1",
            resource: &d.spec.resource,
            hash: &hash,
        };
        let mut existing = BTreeMap::new();
        existing.insert(
            "a".to_owned(),
            kruise_manager::resourcedistribution::plan::desired_copy(&dist, "a", None),
        );
        existing.insert(
            "c".to_owned(),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
        );
        existing.insert(
            "old".to_owned(),
            kruise_manager::resourcedistribution::plan::desired_copy(&dist, "old", None),
        );
        let world = [ns("a"), ns("b"), ns("c"), ns("old")];
        let r = report(&d, &world, &existing).expect("report");
        let states: Vec<(&str, &str)> = r
            .namespaces
            .iter()
            .map(|n| (n.namespace.as_str(), n.state))
            .collect();
        assert_eq!(
            states,
            [
                ("a", "distributed"),
                ("b", "failed"),
                ("c", "conflict"),
                ("gone", "namespace-missing"),
                ("old", "removing")
            ]
        );
        assert!(r.namespaces[1].detail.contains("quota exceeded"));
        assert!(!r.complete());
        let text = render(&r);
        assert!(
            text.starts_with("ResourceDistribution rd: Secret s in 1 of 4 namespaces (3 failed)"),
            "{text}"
        );
        assert!(text.contains("NAMESPACE"), "{text}");
    }
}
