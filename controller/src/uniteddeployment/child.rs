//! The workload of one subset, built from the template (upstream's four adapters'
//! `ApplySubsetTemplate`), and what the reconcile reads back from one. Pure: JSON in, JSON out,
//! so that the four kinds share one path.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1alpha1::{Subset, SubsetKind, UnitedDeployment};
use kruise_api::keys;
use kube::ResourceExt;
use serde_json::{Map, Value, json};

use super::plan::Observed;
use crate::workload::intstr::scaled_value;

/// Why a subset workload cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    #[error(
        "the template must set exactly one of statefulSetTemplate, advancedStatefulSetTemplate, cloneSetTemplate or deploymentTemplate"
    )]
    NoTemplate,
    #[error("the UnitedDeployment has no selector")]
    NoSelector,
    #[error("fail to find subset config {0}")]
    NoSubset(String),
    #[error("the UnitedDeployment has no uid yet")]
    NoUid,
    #[error("serializing the template: {0}")]
    Json(#[from] serde_json::Error),
}

/// The template's metadata and spec of `kind`, as JSON.
fn template_of(ud: &UnitedDeployment, kind: SubsetKind) -> Result<(Value, Value), ChildError> {
    let t = &ud.spec.template;
    let pair = match kind {
        SubsetKind::StatefulSet => t
            .stateful_set_template
            .as_ref()
            .map(|x| (serde_json::to_value(&x.metadata), Ok(x.spec.clone()))),
        SubsetKind::Deployment => t
            .deployment_template
            .as_ref()
            .map(|x| (serde_json::to_value(&x.metadata), Ok(x.spec.clone()))),
        SubsetKind::AdvancedStatefulSet => t.advanced_stateful_set_template.as_ref().map(|x| {
            (
                serde_json::to_value(&x.metadata),
                serde_json::to_value(&x.spec),
            )
        }),
        SubsetKind::CloneSet => t.clone_set_template.as_ref().map(|x| {
            (
                serde_json::to_value(&x.metadata),
                serde_json::to_value(&x.spec),
            )
        }),
    };
    let (meta, spec) = pair.ok_or(ChildError::NoTemplate)?;
    Ok((meta?, spec?))
}

/// Upstream `getSubsetPrefix`: `<ud>-<subset>-`, or `<ud>-` when that is no valid name prefix.
pub fn generate_name(ud: &str, subset: &str) -> String {
    let prefix = format!("{ud}-{subset}-");
    let ok = prefix.len() <= 253
        && prefix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && prefix
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok { prefix } else { format!("{ud}-") }
}

/// `v[k]`, `v` first made an object when it is not one (indexing a non-object would panic).
fn field<'a>(v: &'a mut Value, k: &str) -> &'a mut Value {
    if !v.is_object() {
        *v = json!({});
    }
    &mut v[k]
}

fn string_map(v: Option<&Value>) -> Map<String, Value> {
    v.and_then(Value::as_object).cloned().unwrap_or_default()
}

/// The subset workload: `base` (the existing object, for an update; its labels and
/// annotations are kept under ours) with the template's spec, the subset's selector, replicas,
/// partition, node affinity, tolerations and patch.
pub fn desired(
    ud: &UnitedDeployment,
    kind: SubsetKind,
    subset: &str,
    revision: &str,
    replicas: i32,
    partition: i32,
    base: Option<Value>,
) -> Result<Value, ChildError> {
    let cfg = ud
        .spec
        .topology
        .subsets
        .iter()
        .find(|s| s.name == subset)
        .ok_or_else(|| ChildError::NoSubset(subset.to_owned()))?;
    let selector = ud.spec.selector.as_ref().ok_or(ChildError::NoSelector)?;
    let uid = ud.metadata.uid.clone().ok_or(ChildError::NoUid)?;
    let (tmeta, mut spec) = template_of(ud, kind)?;
    let (group, version, kind_name, _) = kind.gvk();
    let mut obj = base.unwrap_or_else(|| json!({}));
    if !obj.is_object() {
        obj = json!({});
    }
    if !spec.is_object() {
        spec = json!({});
    }
    obj["apiVersion"] = json!(format!("{group}/{version}").trim_start_matches('/'));
    obj["kind"] = json!(kind_name);
    let meta = field(&mut obj, "metadata");
    if !meta.is_object() {
        *meta = json!({});
    }
    let mut labels = string_map(meta.get("labels"));
    labels.extend(string_map(tmeta.get("labels")));
    for (k, v) in selector.match_labels.iter().flatten() {
        labels.insert(k.clone(), json!(v));
    }
    labels.insert(
        keys::KRUISE_CONTROLLER_REVISION_HASH_LABEL.into(),
        json!(revision),
    );
    labels.insert(keys::SUBSET_NAME_LABEL.into(), json!(subset));
    let mut annotations = string_map(meta.get("annotations"));
    annotations.extend(string_map(tmeta.get("annotations")));
    annotations.insert(keys::SUBSET_PATCH_ANNOTATION.into(), json!(patch_text(cfg)));
    meta["namespace"] = json!(ud.namespace().unwrap_or_default());
    meta["labels"] = Value::Object(labels);
    meta["annotations"] = Value::Object(annotations);
    if meta.get("name").is_none() {
        meta["generateName"] = json!(generate_name(&ud.name_any(), subset));
    }
    meta["ownerReferences"] = json!([{
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "UnitedDeployment",
        "name": ud.name_any(),
        "uid": uid,
        "controller": true,
        "blockOwnerDeletion": true,
    }]);
    let mut sel = serde_json::to_value(selector)?;
    *field(field(&mut sel, "matchLabels"), keys::SUBSET_NAME_LABEL) = json!(subset);
    spec["selector"] = sel;
    spec["replicas"] = json!(replicas);
    set_partition(kind, &mut spec, partition);
    let tpl = field(&mut spec, "template");
    let tlabels = field(field(tpl, "metadata"), "labels");
    *field(tlabels, keys::SUBSET_NAME_LABEL) = json!(subset);
    *field(tlabels, keys::KRUISE_CONTROLLER_REVISION_HASH_LABEL) = json!(revision);
    attach_placement(field(tpl, "spec"), cfg);
    if let Some(patch) = &cfg.patch {
        kruise_webhook::workloadspread::subset::merge(tpl, patch);
    }
    obj["spec"] = spec;
    if let Some(o) = obj.as_object_mut() {
        o.remove("status");
    }
    Ok(obj)
}

/// The subset's patch as the `apps.kruise.io/subset-patch` annotation records it.
pub fn patch_text(subset: &Subset) -> String {
    subset
        .patch
        .as_ref()
        .map(Value::to_string)
        .unwrap_or_default()
}

/// Where each kind keeps its partition: a (v1alpha1, as the release's adapter) CloneSet in
/// `updateStrategy.partition`; the two StatefulSets in `updateStrategy.rollingUpdate.partition`
/// when rolling (upstream leaves OnDelete alone); a Deployment has none.
fn set_partition(kind: SubsetKind, spec: &mut Value, partition: i32) {
    match kind {
        SubsetKind::CloneSet => {
            *field(field(spec, "updateStrategy"), "partition") = json!(partition);
        }
        SubsetKind::StatefulSet | SubsetKind::AdvancedStatefulSet => {
            let st = field(spec, "updateStrategy");
            let ty = st.get("type").and_then(Value::as_str).unwrap_or("");
            if ty.is_empty() || ty == "RollingUpdate" {
                *field(st, "type") = json!("RollingUpdate");
                *field(field(st, "rollingUpdate"), "partition") = json!(partition);
            }
        }
        SubsetKind::Deployment => {}
    }
}

/// Upstream `attachNodeAffinity` (the subset's match expressions are added to every required
/// term, a first term made when there is none) and `attachTolerations`.
fn attach_placement(pod_spec: &mut Value, cfg: &Subset) {
    let exprs: Vec<Value> = cfg
        .node_selector_term
        .as_ref()
        .and_then(|t| t.match_expressions.clone())
        .unwrap_or_default()
        .iter()
        .filter_map(|e| serde_json::to_value(e).ok())
        .collect();
    if !exprs.is_empty() {
        let affinity = field(field(pod_spec, "affinity"), "nodeAffinity");
        let req = field(affinity, "requiredDuringSchedulingIgnoredDuringExecution");
        let terms = field(req, "nodeSelectorTerms");
        if terms.as_array().is_none_or(|a| a.is_empty()) {
            *terms = json!([{}]);
        }
        for term in terms.as_array_mut().into_iter().flatten() {
            let list = field(term, "matchExpressions");
            if !list.is_array() {
                *list = json!([]);
            }
            if let Some(a) = list.as_array_mut() {
                a.extend(exprs.iter().cloned());
            }
        }
    }
    if !cfg.tolerations.is_empty() {
        let list = field(pod_spec, "tolerations");
        if !list.is_array() {
            *list = json!([]);
        }
        if let Some(a) = list.as_array_mut() {
            a.extend(
                cfg.tolerations
                    .iter()
                    .filter_map(|t| serde_json::to_value(t).ok()),
            );
        }
    }
}

fn int_at(v: &Value, path: &[&str]) -> i32 {
    path.iter()
        .try_fold(v, |cur, k| cur.get(*k))
        .and_then(Value::as_i64)
        .and_then(|n| i32::try_from(n).ok())
        .unwrap_or(0)
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .try_fold(v, |cur, k| cur.get(*k))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// A v1alpha1 CloneSet's `updateStrategy.partition`, a percentage of its `spec.replicas`
/// rounded up (upstream's adapter `GetSpecPartition`); unset or malformed counts 0.
fn cloneset_partition(obj: &Value) -> i32 {
    let Some(v) = ["spec", "updateStrategy", "partition"]
        .iter()
        .try_fold(obj, |cur, k| cur.get(*k))
        .and_then(|v| serde_json::from_value::<IntOrString>(v.clone()).ok())
    else {
        return 0;
    };
    let replicas = int_at(obj, &["spec", "replicas"]);
    scaled_value(&v, replicas, true).unwrap_or(0)
}

/// What the reconcile reads from an existing subset workload; the updated counts come from
/// its Pods (`pods`: `(revision label, ready)` of each active Pod).
pub fn observe(kind: SubsetKind, obj: &Value, revision: &str, pods: &[(String, bool)]) -> Observed {
    let partition = match kind {
        SubsetKind::CloneSet => cloneset_partition(obj),
        SubsetKind::StatefulSet | SubsetKind::AdvancedStatefulSet => int_at(
            obj,
            &["spec", "updateStrategy", "rollingUpdate", "partition"],
        ),
        SubsetKind::Deployment => 0,
    };
    let updated: Vec<&(String, bool)> = pods.iter().filter(|(r, _)| r == revision).collect();
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    Observed {
        name: str_at(obj, &["metadata", "name"]).to_owned(),
        subset: str_at(obj, &["metadata", "labels", keys::SUBSET_NAME_LABEL]).to_owned(),
        spec_replicas: int_at(obj, &["spec", "replicas"]),
        spec_partition: partition,
        revision: str_at(
            obj,
            &[
                "metadata",
                "labels",
                keys::KRUISE_CONTROLLER_REVISION_HASH_LABEL,
            ],
        )
        .to_owned(),
        patch: str_at(
            obj,
            &["metadata", "annotations", keys::SUBSET_PATCH_ANNOTATION],
        )
        .to_owned(),
        replicas: int_at(obj, &["status", "replicas"]),
        ready_replicas: int_at(obj, &["status", "readyReplicas"]),
        updated_replicas: count(updated.len()),
        updated_ready_replicas: count(updated.iter().filter(|(_, ready)| *ready).count()),
    }
}

/// The labels a subset workload's Pods carry from the UnitedDeployment's selector and the
/// subset (what the workload's selector matches).
pub fn pod_selector(ud: &UnitedDeployment, subset: &str) -> BTreeMap<String, String> {
    let mut m: BTreeMap<String, String> = ud
        .spec
        .selector
        .as_ref()
        .and_then(|s| s.match_labels.clone())
        .unwrap_or_default();
    m.insert(keys::SUBSET_NAME_LABEL.to_owned(), subset.to_owned());
    m
}

/// Whether a Pod carries every label of `want`.
pub fn matches_labels(
    pod: &k8s_openapi::api::core::v1::Pod,
    want: &BTreeMap<String, String>,
) -> bool {
    let labels = pod.metadata.labels.as_ref();
    want.iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// Upstream's adapters' `SetMaxUnavailable`: a (v1alpha1) CloneSet's
/// `updateStrategy.maxUnavailable`, a Deployment's `strategy.rollingUpdate.maxUnavailable`
/// (the StatefulSets never reserve Pods).
pub fn set_max_unavailable(kind: SubsetKind, obj: &mut Value, n: i32) {
    let spec = field(obj, "spec");
    match kind {
        SubsetKind::CloneSet => {
            *field(field(spec, "updateStrategy"), "maxUnavailable") = json!(n);
        }
        SubsetKind::Deployment => {
            let ru = field(field(spec, "strategy"), "rollingUpdate");
            *field(ru, "maxUnavailable") = json!(n);
        }
        SubsetKind::StatefulSet | SubsetKind::AdvancedStatefulSet => {}
    }
}
