//! Table and property tests of the pure core, with small builders for pods and revisions.

mod batches;
mod completion;
mod layers;
mod plan;
mod props;
mod spec;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodReadinessGate,
    PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kruise_api::keys;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Options with `InPlaceWorkloadVerticalScaling` on (off by default, as upstream).
pub(super) fn vertical() -> crate::inplace::UpdateOptions {
    crate::inplace::UpdateOptions {
        features: crate::inplace::Features {
            vertical_scaling: true,
            ..Default::default()
        },
        ..Default::default()
    }
}

pub(super) fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).expect("valid timestamp")
}

/// A revision holding `template` the way CloneSet stores it.
pub(super) fn revision(name: &str, template: Value) -> ControllerRevision {
    let mut t = template;
    if let Some(o) = t.as_object_mut() {
        o.insert("$patch".into(), json!("replace"));
    }
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(RawExtension(json!({"spec": {"template": t}}))),
        revision: 1,
    }
}

pub(super) fn container(name: &str, image: &str) -> Container {
    Container {
        name: name.into(),
        image: Some(image.into()),
        ..Default::default()
    }
}

pub(super) fn with_env(mut c: Container, env: EnvVar) -> Container {
    c.env.get_or_insert_with(Vec::new).push(env);
    c
}

pub(super) fn priority_env(p: i32) -> EnvVar {
    EnvVar {
        name: keys::ENV_CONTAINER_PRIORITY.into(),
        value: Some(p.to_string()),
        ..Default::default()
    }
}

pub(super) fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub(super) fn resources(
    requests: &[(&str, &str)],
    limits: &[(&str, &str)],
) -> ResourceRequirements {
    let to_map = |l: &[(&str, &str)]| -> Option<BTreeMap<String, Quantity>> {
        (!l.is_empty()).then(|| {
            l.iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect()
        })
    };
    ResourceRequirements {
        requests: to_map(requests),
        limits: to_map(limits),
        ..Default::default()
    }
}

pub(super) fn status(name: &str, image: &str, image_id: &str, ready: bool) -> ContainerStatus {
    ContainerStatus {
        name: name.into(),
        image: image.into(),
        image_id: image_id.into(),
        ready,
        container_id: Some(format!("containerd://{name}-{image_id}")),
        ..Default::default()
    }
}

/// A running pod of revision `cs-v1` with these containers, statuses matching the spec, and
/// the InPlaceUpdateReady gate.
pub(super) fn pod(containers: Vec<Container>) -> Pod {
    let statuses = containers
        .iter()
        .map(|c| {
            let image = c.image.clone().unwrap_or_default();
            let mut s = status(&c.name, &image, &format!("id-{image}"), true);
            s.resources = c.resources.clone();
            s
        })
        .collect();
    Pod {
        metadata: ObjectMeta {
            name: Some("cs-abcde".into()),
            namespace: Some("default".into()),
            resource_version: Some("100".into()),
            labels: Some(BTreeMap::from([(
                keys::CONTROLLER_REVISION_HASH_LABEL.to_string(),
                "cs-v1".to_string(),
            )])),
            annotations: Some(BTreeMap::new()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers,
            readiness_gates: Some(vec![PodReadinessGate {
                condition_type: keys::INPLACE_UPDATE_READY.into(),
            }]),
            ..Default::default()
        }),
        status: Some(PodStatus {
            container_statuses: Some(statuses),
            ..Default::default()
        }),
    }
}

pub(super) fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a String> {
    pod.metadata.annotations.as_ref()?.get(key)
}

pub(super) fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a String> {
    pod.metadata.labels.as_ref()?.get(key)
}

pub(super) fn image_of<'a>(pod: &'a Pod, name: &str) -> Option<&'a str> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == name)?
        .image
        .as_deref()
}

pub(super) fn set_annotation(pod: &mut Pod, key: &str, value: &str) {
    pod.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(key.into(), value.into());
}
