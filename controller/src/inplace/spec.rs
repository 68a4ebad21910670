//! Revision diff: what changed between two revisions' pod templates, and whether a pod can take
//! that change in place. Only images, cpu/memory resources (same QoS class), and labels or
//! annotations (some of which feed env vars) can change without recreating the pod.

use super::jsondiff::{self, Op, OpKind, Seg};
use super::{hash, qos, quantity};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::appspub::UpdateSpec;
use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys::{self, k8s};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use thiserror::Error;

/// Behaviour switches that upstream keeps in feature gates; passed in, never global.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Features {
    /// `InPlaceUpdateEnvFromMetadata`: a changed label/annotation read by an env var restarts
    /// the containers reading it.
    pub env_from_metadata: bool,
    /// `InPlaceWorkloadVerticalScaling`: cpu/memory changes are resized in place; without it a
    /// resources change cannot go in place and the Pod is recreated, as upstream.
    pub vertical_scaling: bool,
    /// `RecreatePodWhenChangeVCTInCloneSetGate`: a changed volumeClaimTemplates hash forces
    /// recreation.
    pub recreate_on_volume_claim_templates_change: bool,
}

impl Features {
    /// The switches `gates` set.
    pub fn from_gates(gates: &FeatureGates) -> Self {
        Self {
            env_from_metadata: gates.enabled(Gate::InPlaceUpdateEnvFromMetadata),
            vertical_scaling: gates.enabled(Gate::InPlaceWorkloadVerticalScaling),
            recreate_on_volume_claim_templates_change: gates
                .enabled(Gate::RecreatePodWhenChangeVCTInCloneSetGate),
        }
    }
}

impl Default for Features {
    /// Upstream's default gates.
    fn default() -> Self {
        Self::from_gates(&FeatureGates::default())
    }
}

/// Per-call options, the data half of upstream's `UpdateOptions`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateOptions {
    /// Seconds between marking the pod not ready and patching its spec.
    pub grace_period_seconds: i32,
    /// InPlaceOnly ignores volumeClaimTemplates changes.
    pub ignore_volume_claim_templates_hash_diff: bool,
    pub features: Features,
    /// Resources go through `pods/resize` (Kubernetes >= 1.32) instead of the pod spec.
    pub use_resize_subresource: bool,
    /// Lifecycle state written with the update (CloneSet: `Updating`).
    pub lifecycle_state: Option<kruise_api::appspub::LifecycleStateType>,
}

impl Default for UpdateOptions {
    fn default() -> Self {
        Self {
            grace_period_seconds: 0,
            ignore_volume_claim_templates_hash_diff: false,
            features: Features::default(),
            use_resize_subresource: true,
            lifecycle_state: None,
        }
    }
}

/// Why a revision change cannot be applied in place. The message is meant for a person reading
/// an Event.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum NotInPlace {
    #[error("the pod's current revision is unknown")]
    NoOldRevision,
    #[error("revision {revision} has no readable pod template: {message}")]
    InvalidRevision { revision: String, message: String },
    #[error("volumeClaimTemplates changed")]
    VolumeClaimTemplatesChanged,
    #[error("{field} changed")]
    Changed { field: String },
    #[error("{field} was {action}: resources can be changed in place, not added or removed")]
    ResourceAddedOrRemoved { field: String, action: &'static str },
    #[error("{field} changed: only cpu and memory can be resized in place")]
    ResourceNotResizable { field: String },
    #[error("{field} is not a valid quantity: {value}")]
    InvalidQuantity { field: String, value: String },
    #[error("the pod QoS class would change from {from} to {to}")]
    QosClassChanged {
        from: qos::QosClass,
        to: qos::QosClass,
    },
}

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// The part of a path worth showing: `spec.containers[0].env`, `spec.volumes`.
fn summarize(path: &[Seg]) -> String {
    let keep = match path {
        [
            Seg::Key(spec),
            Seg::Key(list),
            Seg::Index(_),
            Seg::Key(_),
            ..,
        ] if spec == "spec" && CONTAINER_LISTS.contains(&list.as_str()) => 4,
        [Seg::Key(_), Seg::Key(_), ..] => 2,
        _ => path.len(),
    };
    jsondiff::display_path(&path[..keep.min(path.len())])
}

fn template_of(rev: &ControllerRevision) -> Result<(Value, PodTemplateSpec), NotInPlace> {
    let invalid = |message: String| NotInPlace::InvalidRevision {
        revision: rev.metadata.name.clone().unwrap_or_default(),
        message,
    };
    let data = rev.data.as_ref().ok_or_else(|| invalid("no data".into()))?;
    let template = data
        .0
        .get("spec")
        .and_then(|s| s.get("template"))
        .ok_or_else(|| invalid("no spec.template".into()))?;
    let typed: PodTemplateSpec =
        serde_json::from_value(template.clone()).map_err(|e| invalid(e.to_string()))?;
    Ok((jsondiff::normalize(&data.0), typed))
}

fn vct_hash(rev: &ControllerRevision) -> Option<&String> {
    rev.metadata
        .annotations
        .as_ref()?
        .get(keys::CLONESET_VOLUME_CLAIM_TEMPLATE_HASH_ANNOTATION)
}

/// Computes the in-place update from `old` to `new`, or why there is none.
/// `revision` is the name the pod will carry (usually `new`'s name).
pub fn calculate(
    old: Option<&ControllerRevision>,
    new: &ControllerRevision,
    revision: String,
    opts: &UpdateOptions,
) -> Result<UpdateSpec, NotInPlace> {
    let old = old.ok_or(NotInPlace::NoOldRevision)?;
    if opts.features.recreate_on_volume_claim_templates_change
        && !opts.ignore_volume_claim_templates_hash_diff
        && let (Some(a), Some(b)) = (vct_hash(old), vct_hash(new))
        && a != b
    {
        return Err(NotInPlace::VolumeClaimTemplatesChanged);
    }
    let (old_data, old_tpl) = template_of(old)?;
    let (new_data, new_tpl) = template_of(new)?;

    let mut spec = UpdateSpec {
        revision,
        grace_seconds: opts.grace_period_seconds,
        ..Default::default()
    };
    let mut metadata_changed = false;
    for op in jsondiff::diff(&old_data, &new_data) {
        let path = match op.path.as_slice() {
            [Seg::Key(s), Seg::Key(t), rest @ ..] if s == "spec" && t == "template" => rest,
            _ => {
                return Err(NotInPlace::Changed {
                    field: jsondiff::display_path(&op.path),
                });
            }
        };
        match path.first() {
            Some(Seg::Key(k)) if k == "metadata" => metadata_changed = true,
            Some(Seg::Key(k)) if k == "spec" => {
                apply_spec_op(&op, path, &old_tpl, opts, &mut spec)?;
            }
            _ => {
                return Err(NotInPlace::Changed {
                    field: summarize(path),
                });
            }
        }
    }

    if !spec.container_resources.is_empty() {
        let empty = Default::default();
        let from = qos::compute(old_tpl.spec.as_ref().unwrap_or(&empty));
        let to = qos::compute(new_tpl.spec.as_ref().unwrap_or(&empty));
        if from != to {
            return Err(NotInPlace::QosClassChanged { from, to });
        }
    }
    if metadata_changed {
        check_metadata(&old_data, &new_data)?;
        metadata_changes(&old_tpl, &new_tpl, opts, &mut spec);
    }
    Ok(spec)
}

/// Only labels and annotations of the template can follow the pod in place.
fn check_metadata(old_data: &Value, new_data: &Value) -> Result<(), NotInPlace> {
    let others = |data: &Value| -> Map<String, Value> {
        let mut meta = data
            .pointer("/spec/template/metadata")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        meta.remove("labels");
        meta.remove("annotations");
        meta
    };
    let (old, new) = (others(old_data), others(new_data));
    let differing = old
        .iter()
        .find(|(k, v)| new.get(*k) != Some(*v))
        .map(|(k, _)| k)
        .or_else(|| new.keys().find(|k| !old.contains_key(*k)));
    match differing {
        Some(k) => Err(NotInPlace::Changed {
            field: format!("metadata.{k}"),
        }),
        None => Ok(()),
    }
}

fn apply_spec_op(
    op: &Op,
    path: &[Seg],
    old_tpl: &PodTemplateSpec,
    opts: &UpdateOptions,
    spec: &mut UpdateSpec,
) -> Result<(), NotInPlace> {
    let changed = || NotInPlace::Changed {
        field: summarize(path),
    };
    let old_containers = old_tpl
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let (idx, rest) = match path {
        [_, Seg::Key(list), Seg::Index(i), rest @ ..] if list == "containers" => (*i, rest),
        _ => return Err(changed()),
    };
    let name = old_containers
        .get(idx)
        .map(|c| c.name.clone())
        .ok_or_else(changed)?;
    match rest {
        [Seg::Key(k)] if k == "image" => match (&op.kind, &op.value) {
            (OpKind::Replace, Some(Value::String(image))) => {
                spec.container_images.insert(name, image.clone());
                Ok(())
            }
            _ => Err(changed()),
        },
        [Seg::Key(k), ..] if k == "resources" && opts.features.vertical_scaling => {
            resource_op(op, path, rest, name, spec)
        }
        _ => Err(changed()),
    }
}

fn resource_op(
    op: &Op,
    path: &[Seg],
    rest: &[Seg],
    container: String,
    spec: &mut UpdateSpec,
) -> Result<(), NotInPlace> {
    let field = jsondiff::display_path(path);
    let [_, Seg::Key(kind), Seg::Key(resource)] = rest else {
        return Err(NotInPlace::Changed { field });
    };
    if kind != "limits" && kind != "requests" {
        return Err(NotInPlace::Changed { field });
    }
    let value = match (&op.kind, &op.value) {
        (OpKind::Replace, Some(v)) => v,
        (OpKind::Add, _) => {
            return Err(NotInPlace::ResourceAddedOrRemoved {
                field,
                action: "added",
            });
        }
        (OpKind::Remove, _) | (OpKind::Replace, None) => {
            return Err(NotInPlace::ResourceAddedOrRemoved {
                field,
                action: "removed",
            });
        }
    };
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    };
    if quantity::nano_value(&text).is_none() {
        return Err(NotInPlace::InvalidQuantity { field, value: text });
    }
    if resource != k8s::RESOURCE_CPU && resource != k8s::RESOURCE_MEMORY {
        return Err(NotInPlace::ResourceNotResizable { field });
    }
    let entry = spec.container_resources.entry(container).or_default();
    let list = if kind == "limits" {
        &mut entry.limits
    } else {
        &mut entry.requests
    };
    list.get_or_insert_with(BTreeMap::new)
        .insert(resource.clone(), Quantity(text));
    Ok(())
}

/// Splits label/annotation changes into those read by env vars (the containers reading them
/// restart, so they go per container) and a plain metadata patch for the rest.
fn metadata_changes(
    old_tpl: &PodTemplateSpec,
    new_tpl: &PodTemplateSpec,
    opts: &UpdateOptions,
    spec: &mut UpdateSpec,
) {
    let meta_map = |m: &Option<ObjectMeta>, labels: bool| -> BTreeMap<String, String> {
        m.as_ref()
            .and_then(|m| {
                if labels {
                    m.labels.clone()
                } else {
                    m.annotations.clone()
                }
            })
            .unwrap_or_default()
    };
    let new_containers = new_tpl
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();

    let mut patch = Map::new();
    for (labels, field, env_path) in [
        (true, "labels", "metadata.labels"),
        (false, "annotations", "metadata.annotations"),
    ] {
        let mut old = meta_map(&old_tpl.metadata, labels);
        let mut new = meta_map(&new_tpl.metadata, labels);
        if opts.features.env_from_metadata {
            // Only added or changed keys restart containers; a removed key just leaves the
            // old env value in place, as upstream does.
            let touched: Vec<(String, String)> = new
                .iter()
                .filter(|(k, v)| old.get(*k) != Some(*v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for (key, value) in touched {
                let readers: Vec<&str> = new_containers
                    .iter()
                    .filter(|c| hash::references_metadata(c, env_path, &key))
                    .map(|c| c.name.as_str())
                    .collect();
                if readers.is_empty() {
                    continue;
                }
                for reader in readers {
                    let meta = spec
                        .container_ref_metadata
                        .entry(reader.to_string())
                        .or_default();
                    let map = if labels {
                        &mut meta.labels
                    } else {
                        &mut meta.annotations
                    };
                    map.get_or_insert_with(BTreeMap::new)
                        .insert(key.clone(), value.clone());
                }
                spec.update_env_from_metadata = true;
                old.remove(&key);
                new.remove(&key);
            }
        }
        let mut changes = Map::new();
        for (k, v) in &new {
            if old.get(k) != Some(v) {
                changes.insert(k.clone(), Value::String(v.clone()));
            }
        }
        for k in old.keys() {
            if !new.contains_key(k) {
                changes.insert(k.clone(), Value::Null);
            }
        }
        if !changes.is_empty() {
            patch.insert(field.to_string(), Value::Object(changes));
        }
    }
    if !patch.is_empty() {
        let body = Value::Object(Map::from_iter([(
            "metadata".to_string(),
            Value::Object(patch),
        )]));
        spec.meta_data_patch = Some(ByteString(body.to_string().into_bytes()));
    }
}

/// Applies a metadata patch (as written in `UpdateSpec.metaDataPatch`) to labels/annotations.
/// Upstream's patch is a strategic merge patch of the pod; for maps that is a merge where
/// `null` deletes a key. Other fields never appear in patches we compute and are ignored.
pub fn apply_metadata_patch(meta: &mut ObjectMeta, patch: &[u8]) -> Result<(), serde_json::Error> {
    let body: Value = serde_json::from_slice(patch)?;
    let Some(Value::Object(metadata)) = body.get("metadata") else {
        return Ok(());
    };
    for (field, changes) in metadata {
        let target = match field.as_str() {
            "labels" => &mut meta.labels,
            "annotations" => &mut meta.annotations,
            other => {
                tracing::warn!(
                    field = other,
                    "ignoring unsupported field in in-place metadata patch"
                );
                continue;
            }
        };
        let Value::Object(changes) = changes else {
            continue;
        };
        let map = target.get_or_insert_with(BTreeMap::new);
        for (k, v) in changes {
            match v {
                Value::String(s) => {
                    map.insert(k.clone(), s.clone());
                }
                Value::Null => {
                    map.remove(k);
                }
                other => {
                    map.insert(k.clone(), other.to_string());
                }
            }
        }
    }
    Ok(())
}
