//! What pre-download reads from each kind of workload: [`Workload`] and its constructors, each
//! reading the workload as its upstream controller does.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1beta1::{
    CloneSet, CloneSetPodUpdateStrategyType, DaemonSet, PodUpdateStrategyType, StatefulSet,
    StatefulSetUpdateStrategyType,
};
use kruise_api::keys;
use kube::{Resource, ResourceExt};

use super::STATEFULSET_JOB_TIMEOUT_SECONDS;
use crate::workload::intstr::{partition_replicas, scaled_value};

/// What pre-download reads from the workload that rolls out (CloneSet or Advanced
/// StatefulSet), each read as its upstream controller reads it.
#[derive(Clone, Debug)]
pub struct Workload<'a> {
    /// The controller reference the jobs carry.
    pub owner: OwnerReference,
    pub namespace: String,
    pub selector: &'a LabelSelector,
    pub template: &'a PodTemplateSpec,
    pub replicas: i32,
    /// Updated ready Pods required first (`imagePreDownloadMinUpdatedReadyPods`, scaled).
    pub min_updated_ready: Result<i32, String>,
    /// `status.updateRevision` and `status.updatedReadyReplicas`.
    pub status_update_revision: &'a str,
    pub updated_ready_replicas: i32,
    /// Why the update strategy rules pre-download out (ReCreate, OnDelete), if it does.
    pub strategy_ignores: Option<&'static str>,
    /// Whether every Pod updates in one batch (partition 0, maxUnavailable ≥ replicas).
    pub one_batch: Result<bool, String>,
    /// Nodes pulling at once, and the per-attempt pull timeout.
    pub parallelism: IntOrString,
    pub timeout_seconds: i32,
}

impl<'a> Workload<'a> {
    /// A CloneSet (upstream `cloneset_predownload_image.go`); `None` when it has no name or
    /// uid yet.
    pub fn cloneset(cs: &'a CloneSet) -> Option<Self> {
        let replicas = cs.spec.replicas.unwrap_or(1);
        let rolling = cs.spec.update_strategy.rolling_update.as_ref();
        let strategy_ignores = match rolling {
            Some(r) if r.pod_update_policy != Some(CloneSetPodUpdateStrategyType::ReCreate) => None,
            _ => Some("update policy is ReCreate"),
        };
        let one_batch = rolling
            .map(|r| -> Result<bool, String> {
                let partition = partition_replicas(r.partition.as_ref(), replicas)
                    .map_err(|e| e.to_string())?;
                let default = IntOrString::String(keys::DEFAULT_CLONESET_MAX_UNAVAILABLE.into());
                let max_unavailable = scaled_value(
                    r.max_unavailable.as_ref().unwrap_or(&default),
                    replicas,
                    false,
                )
                .map_err(|e| e.to_string())?;
                Ok(partition == 0 && max_unavailable >= replicas)
            })
            .unwrap_or(Ok(false));
        let status = cs.status.as_ref();
        Some(Workload {
            owner: cs.controller_owner_ref(&())?,
            namespace: cs.namespace()?,
            selector: &cs.spec.selector,
            template: &cs.spec.template,
            replicas,
            min_updated_ready: scaled_value(
                &IntOrString::Int(cs_min_updated_ready_pods(cs)),
                replicas,
                true,
            )
            .map_err(|e| e.to_string()),
            status_update_revision: status.map_or("", |s| s.update_revision.as_str()),
            updated_ready_replicas: status.map_or(0, |s| s.updated_ready_replicas),
            strategy_ignores,
            one_batch,
            parallelism: cs_job_parallelism(cs),
            timeout_seconds: cs_job_timeout(cs),
        })
    }

    /// An Advanced StatefulSet (upstream `statefulset_predownload_image.go` and `doPreDownload`):
    /// the numbers come from its annotations only; an unreadable one counts as upstream's zero
    /// value.
    pub fn statefulset(sts: &'a StatefulSet) -> Option<Self> {
        let replicas = sts.spec.replicas();
        let rolling = sts.spec.update_strategy.rolling_update.as_ref();
        let on_delete =
            sts.spec.update_strategy.type_ == Some(StatefulSetUpdateStrategyType::OnDelete);
        let strategy_ignores = match rolling {
            _ if on_delete => Some("update strategy is OnDelete"),
            Some(r) if r.pod_update_policy != Some(PodUpdateStrategyType::ReCreate) => None,
            _ => Some("update policy is ReCreate"),
        };
        let one_batch = rolling.is_some_and(|r| {
            // Upstream's default is the string "1", which its percent parser refuses: zero.
            let max_unavailable = r
                .max_unavailable
                .as_ref()
                .and_then(|v| scaled_value(v, replicas, false).ok())
                .unwrap_or(0);
            r.partition.unwrap_or(0) == 0 && max_unavailable >= replicas
        });
        let annotation = |key: &str| sts.annotations().get(key).map(|v| v.trim());
        let min_updated_ready =
            annotation(keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_ANNOTATION).map_or(0, |v| {
                let v = v
                    .parse()
                    .map_or_else(|_| IntOrString::String(v.to_owned()), IntOrString::Int);
                scaled_value(&v, replicas, true).unwrap_or(0)
            });
        let status = sts.status.as_ref();
        Some(Workload {
            owner: sts.controller_owner_ref(&())?,
            namespace: sts.namespace()?,
            selector: &sts.spec.selector,
            template: &sts.spec.template,
            replicas,
            min_updated_ready: Ok(min_updated_ready),
            status_update_revision: status.map_or("", |s| s.update_revision.as_str()),
            updated_ready_replicas: status.map_or(0, |s| s.updated_ready_replicas),
            strategy_ignores,
            one_batch: Ok(one_batch),
            parallelism: annotated_parallelism(sts.annotations()),
            timeout_seconds: annotated_timeout(sts.annotations()),
        })
    }
}

impl<'a> Workload<'a> {
    /// An Advanced DaemonSet, for building and applying its jobs; the DaemonSet decides when
    /// itself (`crate::daemonset::predownload`), so the fields only [`decide`] reads are left
    /// neutral. The numbers come from its annotations only, as upstream reads them.
    pub fn daemonset(ds: &'a DaemonSet) -> Option<Self> {
        let status = ds.status.as_ref();
        Some(Workload {
            owner: ds.controller_owner_ref(&())?,
            namespace: ds.namespace()?,
            selector: &ds.spec.selector,
            template: &ds.spec.template,
            replicas: status.map_or(0, |s| s.desired_number_scheduled),
            min_updated_ready: Ok(0),
            status_update_revision: "",
            updated_ready_replicas: 0,
            strategy_ignores: None,
            one_batch: Ok(false),
            parallelism: annotated_parallelism(ds.annotations()),
            timeout_seconds: annotated_timeout(ds.annotations()),
        })
    }
}

fn cs_annotation<'a>(cs: &'a CloneSet, key: &str) -> Option<&'a str> {
    cs.annotations().get(key).map(String::as_str)
}

fn in_place_strategy(cs: &CloneSet) -> Option<&kruise_api::appspub::InPlaceUpdateStrategy> {
    cs.spec
        .update_strategy
        .rolling_update
        .as_ref()
        .and_then(|r| r.in_place_update_strategy.as_ref())
}

/// Updated ready pods required first: the v1beta1 field, else the v1alpha1 annotation.
fn cs_min_updated_ready_pods(cs: &CloneSet) -> i32 {
    in_place_strategy(cs)
        .and_then(|s| s.image_pre_download_min_updated_ready_pods)
        .or_else(|| {
            cs_annotation(
                cs,
                keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_ANNOTATION,
            )
            .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Nodes pulling at once: the v1beta1 field, else the annotation, else 1.
fn cs_job_parallelism(cs: &CloneSet) -> IntOrString {
    in_place_strategy(cs)
        .and_then(|s| s.image_pre_download_parallelism.clone())
        .or_else(|| {
            cs_annotation(cs, keys::IMAGE_PREDOWNLOAD_PARALLELISM_ANNOTATION)
                .and_then(|v| v.trim().parse().ok())
                .map(IntOrString::Int)
        })
        .unwrap_or(IntOrString::Int(1))
}

/// Per-attempt pull timeout: the v1beta1 field, else the annotation, else the default.
fn cs_job_timeout(cs: &CloneSet) -> i32 {
    in_place_strategy(cs)
        .and_then(|s| s.image_pre_download_timeout_seconds)
        .or_else(|| {
            cs_annotation(cs, keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_ANNOTATION)
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(keys::DEFAULT_IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS)
}

/// Nodes pulling at once, from the workload's annotation only (Advanced StatefulSet and
/// DaemonSet, as upstream reads them), else 1.
fn annotated_parallelism(annotations: &BTreeMap<String, String>) -> IntOrString {
    IntOrString::Int(
        annotations
            .get(keys::IMAGE_PREDOWNLOAD_PARALLELISM_ANNOTATION)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(1),
    )
}

/// The per-attempt pull timeout, from the workload's annotation only, else upstream's default.
fn annotated_timeout(annotations: &BTreeMap<String, String>) -> i32 {
    annotations
        .get(keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_ANNOTATION)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(STATEFULSET_JOB_TIMEOUT_SECONDS)
}
