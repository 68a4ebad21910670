//! SidecarSet validation (`/validate-apps-kruise-io-sidecarset`, upstream
//! `pkg/webhook/sidecarset/`): the spec's rules, and the refusal of a SidecarSet that injects a
//! container another SidecarSet already injects into overlapping Pods. Also the decoding and
//! the hashes [`super::defaults`] records.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1beta1::{ResourcesPolicy, SidecarContainer, SidecarSet, SidecarSetSpec};
use kruise_api::{keys, selector, sidecarset as wire};
use serde_json::Value;

use kruise_api::features::{FeatureGates, Gate};
use kube::core::admission::Operation;

use super::{SidecarSetLookup, conversion, resources, revision};
use crate::review::{Outcome, Request};

/// Decodes a SidecarSet of either version as v1beta1; the error names what is wrong.
pub fn decode(obj: &Value) -> Result<SidecarSet, String> {
    let beta = match obj.get("apiVersion").and_then(Value::as_str) {
        Some(keys::APPS_V1ALPHA1) => conversion::SCHEME.plain_forward(obj),
        _ => obj.clone(),
    };
    serde_json::from_value(beta).map_err(|e| format!("cannot decode SidecarSet: {e}"))
}

/// The annotations defaulting writes: the two SidecarSet hashes (upstream
/// `setHashSidecarSet`), which the Pod webhook and the controller compare Pods against.
pub fn hash_annotations(spec: &SidecarSetSpec) -> Result<[(String, String); 2], String> {
    let h = wire::sidecarset_hash(spec).map_err(|e| e.to_string())?;
    let w = wire::sidecarset_hash_without_image(spec).map_err(|e| e.to_string())?;
    Ok([
        (keys::SIDECARSET_HASH_ANNOTATION.to_owned(), h),
        (keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION.to_owned(), w),
    ])
}

/// Every rule one SidecarSet breaks, each naming its field.
pub fn violations(spec: &SidecarSetSpec) -> Vec<String> {
    let mut errs = Vec::new();
    match &spec.selector {
        None => errs.push("spec.selector: Required value: a SidecarSet must select Pods".into()),
        Some(sel) => {
            selector_violations("spec.selector", sel, &mut errs);
            if selector::is_empty(sel) {
                errs.push("spec.selector: Invalid value: empty selector selects no Pods; set matchLabels or matchExpressions".into());
            }
        }
    }
    if let Some(ns) = &spec.namespace_selector {
        selector_violations("spec.namespaceSelector", ns, &mut errs);
    }
    let mut names = BTreeSet::new();
    for (field, list) in [
        ("initContainers", &spec.init_containers),
        ("containers", &spec.containers),
    ] {
        if field == "containers" && list.is_empty() && spec.init_containers.is_empty() {
            errs.push(
                "spec.containers: Required value: a SidecarSet needs at least one container or init container".into(),
            );
        }
        for (i, c) in list.iter().enumerate() {
            container_violations(
                &format!("spec.{field}[{i}]"),
                field,
                c,
                &mut names,
                &mut errs,
            );
        }
    }
    let volumes: BTreeSet<&str> = spec.volumes.iter().map(|v| v.name.as_str()).collect();
    for (i, v) in spec.volumes.iter().enumerate() {
        if v.name.is_empty() {
            errs.push(format!("spec.volumes[{i}].name: Required value"));
        }
    }
    if volumes.len() != spec.volumes.len() {
        errs.push("spec.volumes: Duplicate value: volume names must be unique".into());
    }
    let us = &spec.update_strategy;
    if let Some(m) = &us.max_unavailable {
        match int_or_percent(m) {
            Err(e) => errs.push(format!("spec.updateStrategy.maxUnavailable: {e}")),
            Ok(0) if !us.is_not_update() => errs.push(
                "spec.updateStrategy.maxUnavailable: Invalid value: 0: must be greater than 0 (use updateStrategy.paused to stop)".into(),
            ),
            Ok(_) => {}
        }
    }
    if let Some(p) = &us.partition
        && let Err(e) = int_or_percent(p)
    {
        errs.push(format!("spec.updateStrategy.partition: {e}"));
    }
    if let Some(sel) = &us.selector {
        selector_violations("spec.updateStrategy.selector", sel, &mut errs);
    }
    for (i, p) in spec.patch_pod_metadata.iter().enumerate() {
        if p.annotations.is_empty() {
            errs.push(format!(
                "spec.patchPodMetadata[{i}].annotations: Required value: nothing to patch"
            ));
        }
        for (k, v) in &p.annotations {
            if p.patch_policy
                == Some(kruise_api::apps::v1beta1::SidecarSetPatchPolicyType::MergePatchJson)
                && !serde_json::from_str::<Value>(v).is_ok_and(|v| v.is_object())
            {
                errs.push(format!(
                    "spec.patchPodMetadata[{i}].annotations[{k}]: Invalid value: MergePatchJson needs a JSON object"
                ));
            }
        }
    }
    if let Some(rev) = &spec.injection_strategy.revision
        && !super::revision::is_pinned(rev)
    {
        errs.push(
            "spec.injectionStrategy.revision: Invalid value: revisionName and customVersion cannot both be empty; set one, or remove revision".into(),
        );
    }
    if spec.revision_history_limit.is_some_and(|n| n < 0) {
        errs.push("spec.revisionHistoryLimit: Invalid value: must be 0 or more".into());
    }
    errs
}

fn selector_violations(path: &str, sel: &LabelSelector, errs: &mut Vec<String>) {
    use selector::Violation as V;
    for (i, v) in selector::violations(sel) {
        let p = format!("{path}.matchExpressions[{i}]");
        errs.push(match v {
            V::KeyRequired => format!("{p}.key: Required value"),
            V::ValuesRequired => format!("{p}.values: Required value: In and NotIn need values"),
            V::ValuesForbidden => {
                format!("{p}.values: Forbidden: Exists and DoesNotExist take no values")
            }
            V::InvalidOperator(op) => format!(
                "{p}.operator: Unsupported value: {op:?}: use In, NotIn, Exists or DoesNotExist"
            ),
        });
    }
}

fn container_violations(
    path: &str,
    field: &str,
    c: &SidecarContainer,
    names: &mut BTreeSet<String>,
    errs: &mut Vec<String>,
) {
    let name = &c.container.name;
    if name.is_empty() {
        errs.push(format!("{path}.name: Required value"));
    } else if !names.insert(name.clone()) {
        errs.push(format!("{path}.name: Duplicate value: {name:?}"));
    }
    if c.container.image.as_deref().unwrap_or_default().is_empty() {
        errs.push(format!("{path}.image: Required value"));
    }
    if c.is_hot_upgrade() {
        if field == "initContainers" {
            errs.push(format!(
                "{path}.upgradeStrategy.upgradeType: Invalid value: \"HotUpgrade\": init containers cannot be hot upgraded"
            ));
        }
        let empty = &c.upgrade_strategy.hot_upgrade_empty_image;
        if empty.is_empty() {
            errs.push(format!("{path}.upgradeStrategy.hotUpgradeEmptyImage: Required value: HotUpgrade needs an empty image"));
        } else if c.container.image.as_deref() == Some(empty.as_str()) {
            errs.push(format!("{path}.upgradeStrategy.hotUpgradeEmptyImage: Invalid value: {empty:?}: must differ from the container's image"));
        }
    }
    if let Some(policy) = &c.resources_policy {
        resources_policy_violations(&format!("{path}.resourcesPolicy"), field, c, policy, errs);
    }
    for (j, t) in c.transfer_env.iter().enumerate() {
        let tp = format!("{path}.transferEnv[{j}]");
        let from = t.source_container_name_from.is_some();
        if t.source_container_name.is_empty() != from {
            errs.push(format!("{tp}: Invalid value: set exactly one of sourceContainerName and sourceContainerNameFrom"));
        }
        if t.env_name.is_empty() == t.env_names.is_empty() {
            errs.push(format!(
                "{tp}: Invalid value: set exactly one of envName and envNames"
            ));
        }
    }
}

/// Upstream `validateResourcesPolicy`: not with the container's own resources, only on native
/// sidecars among init containers, a mode, a regex that compiles, and at least one
/// expression list whose expressions evaluate (the variable bound to 1).
fn resources_policy_violations(
    path: &str,
    field: &str,
    c: &SidecarContainer,
    policy: &ResourcesPolicy,
    errs: &mut Vec<String>,
) {
    if field == "initContainers" && !c.is_native_sidecar() {
        errs.push(format!("{path}: Invalid value: resourcesPolicy is only supported for containers with RestartPolicy Always"));
    }
    let own = c.container.resources.as_ref();
    if own.is_some_and(|r| {
        r.limits.as_ref().is_some_and(|l| !l.is_empty())
            || r.requests.as_ref().is_some_and(|l| !l.is_empty())
    }) {
        errs.push(format!(
            "{path}: Invalid value: resourcesPolicy and resources cannot be configured together"
        ));
        return;
    }
    let mode = &policy.target_containers_mode;
    if policy.mode().is_none() {
        errs.push(format!(
            "{path}.targetContainersMode: Unsupported value: {mode:?}: supported values: \"sum\", \"max\""
        ));
    }
    let regex = &policy.target_containers_name_regex;
    if regex.is_empty() {
        errs.push(format!(
            "{path}.targetContainersNameRegex: Required value: invalid empty regex"
        ));
    } else if let Err(e) = regex::Regex::new(regex) {
        errs.push(format!(
            "{path}.targetContainersNameRegex: Invalid value: {regex:?}: invalid regex pattern: {e}"
        ));
    }
    let exprs = &policy.resources_expr;
    if exprs.limits.is_none() && exprs.requests.is_none() {
        errs.push(format!("{path}.resourcesExpr: Invalid value: at least one of limits or requests must be configured"));
        return;
    }
    for (kind, list) in [("limits", &exprs.limits), ("requests", &exprs.requests)] {
        let Some(list) = list else { continue };
        for (resource, expr) in [("cpu", &list.cpu), ("memory", &list.memory)] {
            if expr.is_empty() {
                continue;
            }
            if let Some(why) = resources::check_expression(resource, expr) {
                errs.push(format!(
                    "{path}.resourcesExpr.{kind}.{resource}: Invalid value: {expr:?}: {why}"
                ));
            }
        }
    }
}

fn int_or_percent(v: &IntOrString) -> Result<i64, String> {
    match v {
        IntOrString::Int(n) if *n >= 0 => Ok(i64::from(*n)),
        IntOrString::Int(n) => Err(format!("Invalid value: {n}: must be 0 or more")),
        IntOrString::String(s) => s
            .strip_suffix('%')
            .and_then(|p| p.parse::<i64>().ok())
            .filter(|p| (0..=100).contains(p))
            .ok_or_else(|| {
                format!("Invalid value: {s:?}: must be an integer or a percentage 0%-100%")
            }),
    }
}

/// Whether two selectors may select one Pod: no key both pin to different values (upstream
/// `IsSelectorOverlapping` compares matchLabels and In/NotIn expressions the same way).
fn selectors_overlap(a: &LabelSelector, b: &LabelSelector) -> bool {
    let pinned = |s: &LabelSelector| -> BTreeMap<String, BTreeSet<String>> {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (k, v) in s.match_labels.iter().flatten() {
            m.entry(k.clone()).or_default().insert(v.clone());
        }
        for e in s.match_expressions.iter().flatten() {
            if e.operator == "In" {
                let vals: BTreeSet<String> = e.values.iter().flatten().cloned().collect();
                m.entry(e.key.clone())
                    .and_modify(|cur| *cur = cur.intersection(&vals).cloned().collect())
                    .or_insert(vals);
            }
        }
        m
    };
    let (pa, pb) = (pinned(a), pinned(b));
    pa.iter()
        .all(|(k, va)| pb.get(k).is_none_or(|vb| !va.is_disjoint(vb)))
}

fn namespaces_overlap(a: &SidecarSetSpec, b: &SidecarSetSpec) -> bool {
    match (&a.namespace_selector, &b.namespace_selector) {
        (Some(x), Some(y)) => selectors_overlap(x, y),
        _ => true,
    }
}

/// The first container name `spec` injects that `other` already injects into overlapping
/// Pods, as a message naming both SidecarSets (upstream `validateSidecarConflict`).
pub fn conflict<S: std::borrow::Borrow<SidecarSet>>(
    name: &str,
    spec: &SidecarSetSpec,
    others: &[S],
) -> Option<String> {
    let mut others: Vec<&SidecarSet> = others
        .iter()
        .map(S::borrow)
        .filter(|o| o.metadata.name.as_deref() != Some(name))
        .collect();
    others.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for other in others {
        let (Some(sa), Some(sb)) = (&spec.selector, &other.spec.selector) else {
            continue;
        };
        if !namespaces_overlap(spec, &other.spec) || !selectors_overlap(sa, sb) {
            continue;
        }
        let theirs: BTreeSet<String> = wire::containers_in_pod(&other.spec)
            .into_iter()
            .chain(
                other
                    .spec
                    .init_containers
                    .iter()
                    .map(|c| c.container.name.clone()),
            )
            .collect();
        for (field, list) in [
            ("initContainers", &spec.init_containers),
            ("containers", &spec.containers),
        ] {
            for (i, c) in list.iter().enumerate() {
                let mut mine = vec![c.container.name.clone()];
                if c.is_hot_upgrade() {
                    let (x, y) = wire::hot_upgrade_container_names(&c.container.name);
                    mine.extend([x, y]);
                }
                if let Some(n) = mine.iter().find(|n| theirs.contains(*n)) {
                    return Some(format!(
                        "spec.{field}[{i}].name: Forbidden: container {n:?} of SidecarSet {name:?} is already injected by SidecarSet {:?} into overlapping Pods; rename it or make the selectors disjoint",
                        other.metadata.name.as_deref().unwrap_or_default()
                    ));
                }
            }
        }
    }
    None
}

/// SidecarSet validation: the rules of [`violations`], then the conflict with the
/// other SidecarSets.
pub async fn validate_set<C: SidecarSetLookup>(
    req: Request,
    cluster: &C,
    gates: &FeatureGates,
) -> Outcome {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Outcome::Allow;
    }
    let Some(raw) = req.object.as_ref() else {
        return Outcome::bad_request("SidecarSet request carries no object");
    };
    let set = match decode(raw) {
        Ok(s) => s,
        Err(e) => return Outcome::bad_request(e),
    };
    let errs = violations(&set.spec);
    if !errs.is_empty() {
        return Outcome::invalid(errs.join("; "));
    }
    if !set.spec.patch_pod_metadata.is_empty() {
        let config = match cluster.kruise_configuration().await {
            Ok(c) => c,
            Err(e) => return Outcome::forbidden(e),
        };
        if let Some(why) = super::whitelist::refusal(
            &set,
            &config,
            gates.enabled(Gate::SidecarSetPatchPodMetadataDefaultsAllowed),
            &revision::revisions_namespace(),
        ) {
            return Outcome::invalid(why);
        }
    }
    let name = set.metadata.name.as_deref().unwrap_or(&req.name);
    // A pin to a revision that does not exist would silently inject the latest spec.
    if let Some(rev) = set
        .spec
        .injection_strategy
        .revision
        .as_ref()
        .filter(|r| revision::is_pinned(r))
    {
        match cluster.injection_revision(&set, rev).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                return Outcome::invalid(revision::not_found(
                    name,
                    rev,
                    &revision::revisions_namespace(),
                ));
            }
            Err(e) => return Outcome::forbidden(e),
        }
    }
    cluster.sidecar_set_changing();
    let others = match cluster.sidecar_sets().await {
        Ok(s) => s,
        Err(e) => return Outcome::forbidden(e),
    };
    match conflict(name, &set.spec, &others) {
        Some(msg) => Outcome::invalid(msg),
        None => Outcome::Allow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(name: &str, labels: Value, container: &str) -> SidecarSet {
        decode(
            &json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": labels},
                "containers": [{"name": container, "image": "busybox:1"}]}}),
        )
        .expect("decodes")
    }

    #[test]
    fn valid_set_has_no_violations() {
        assert!(violations(&set("a", json!({"app": "web"}), "proxy").spec).is_empty());
    }

    #[test]
    fn violations_name_their_field() {
        let s = decode(
            &json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
            "metadata": {"name": "x"},
            "spec": {"containers": [
                {"name": "p", "image": ""},
                {"name": "p", "image": "e:1", "upgradeStrategy": {"upgradeType": "HotUpgrade"}},
            ], "updateStrategy": {"maxUnavailable": 0, "partition": "120%"},
            "injectionStrategy": {"revision": {"policy": "Partial"}}}}),
        )
        .expect("decodes");
        let v = violations(&s.spec).join("\n");
        for want in [
            "spec.selector: Required value",
            "spec.containers[0].image: Required value",
            "spec.containers[1].name: Duplicate value",
            "spec.containers[1].upgradeStrategy.hotUpgradeEmptyImage: Required value",
            "spec.updateStrategy.maxUnavailable: Invalid value: 0",
            "spec.updateStrategy.partition: Invalid value: \"120%\"",
            "spec.injectionStrategy.revision: Invalid value: revisionName and customVersion",
        ] {
            assert!(v.contains(want), "missing {want:?} in\n{v}");
        }
    }

    #[test]
    fn conflict_names_the_other_set() {
        let first = set("first", json!({"app": "web"}), "proxy");
        let second = set("second", json!({"app": "web", "tier": "fe"}), "proxy");
        let msg = conflict("second", &second.spec, std::slice::from_ref(&first)).expect("conflict");
        assert!(
            msg.contains("\"first\"") && msg.contains("\"second\""),
            "{msg}"
        );
        assert!(msg.starts_with("spec.containers[0].name"), "{msg}");
        let disjoint = set("third", json!({"app": "db"}), "proxy");
        assert_eq!(
            conflict("third", &disjoint.spec, std::slice::from_ref(&first)),
            None
        );
        let other_name = set("fourth", json!({"app": "web"}), "logger");
        assert_eq!(
            conflict("fourth", &other_name.spec, std::slice::from_ref(&first)),
            None
        );
        // Updating a set does not conflict with its own stored copy.
        assert_eq!(
            conflict("first", &first.spec, std::slice::from_ref(&first)),
            None
        );
    }

    #[test]
    fn hashes_are_written() {
        let s = set("a", json!({"app": "web"}), "proxy");
        let [(k1, h1), (k2, h2)] = hash_annotations(&s.spec).expect("hashes");
        assert_eq!(k1, keys::SIDECARSET_HASH_ANNOTATION);
        assert_eq!(k2, keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION);
        assert_ne!(h1, h2);
    }
}
