//! The claims of Advanced StatefulSet Pods against the set's volumeClaimTemplates (upstream
//! `pkg/util/pvc` and `statefulset_resize_pvc.go`): whether a claim is compatible with its
//! template (storageClassName, accessModes, a request at least the template's), ready (its
//! capacity reached its request), and `status.volumeClaims`. Pure; the writes are in
//! [`super::sync`].

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kruise_api::apps::v1beta1::{StatefulSet, VolumeClaimStatus, VolumeClaimUpdateStrategyType};
use kruise_api::features::{FeatureGates, Gate};
use kube::ResourceExt;

use super::identity::{claim_name, ordinal_of};
use crate::pvccache::PvcCache;
use crate::workload::podutil;

/// Whether the set's claims follow its templates as its Pods are updated (the gate and
/// `volumeClaimUpdateStrategy.type: OnPodRollingUpdate`).
pub fn resize_on_update(sts: &StatefulSet, gates: &FeatureGates) -> bool {
    gates.enabled(Gate::StatefulSetAutoResizePVCGate)
        && sts.spec.volume_claim_update_strategy.type_
            == Some(VolumeClaimUpdateStrategyType::OnPodRollingUpdate)
}

/// The claims of a namespace by name (the set's claims are found by name: they are owned by
/// the set only under `whenDeleted: Delete`).
pub type ClaimsByName = BTreeMap<String, Arc<PersistentVolumeClaim>>;

/// The claims of `namespace` in the watch, by name (none read for a set without templates).
pub fn of_namespace(sts: &StatefulSet, cache: &PvcCache, namespace: &str) -> ClaimsByName {
    if sts.spec.volume_claim_templates.is_empty() {
        return ClaimsByName::new();
    }
    by_name(cache.state(), namespace)
}

/// The claims of `namespace` in `all`, by name.
pub fn by_name(all: Vec<Arc<PersistentVolumeClaim>>, namespace: &str) -> ClaimsByName {
    all.into_iter()
        .filter(|c| c.metadata.namespace.as_deref() == Some(namespace))
        .map(|c| (c.name_any(), c))
        .collect()
}

fn storage_milli(q: Option<&BTreeMap<String, Quantity>>) -> Option<i128> {
    let q = q?.get("storage")?;
    kruise_api::vct_hash::parse_quantity(&q.0)?.milli()
}

fn request(c: &PersistentVolumeClaim) -> Option<i128> {
    storage_milli(c.spec.as_ref()?.resources.as_ref()?.requests.as_ref())
}

fn capacity(c: &PersistentVolumeClaim) -> Option<i128> {
    storage_milli(c.status.as_ref()?.capacity.as_ref())
}

/// Upstream `IsClaimCompatibleWithoutSize`: the StorageClass (when both name one; a template
/// without one got the default class) and the access modes.
pub fn compatible_without_size(claim: &PersistentVolumeClaim, tpl: &PersistentVolumeClaim) -> bool {
    let (c, t) = (
        claim.spec.clone().unwrap_or_default(),
        tpl.spec.clone().unwrap_or_default(),
    );
    let classes_differ = matches!(
        (&c.storage_class_name, &t.storage_class_name),
        (Some(a), Some(b)) if a != b
    );
    !classes_differ && c.access_modes.unwrap_or_default() == t.access_modes.unwrap_or_default()
}

/// The claim requests less storage than the template (upstream `IsPVCNeedExpand`).
pub fn needs_expand(claim: &PersistentVolumeClaim, tpl: &PersistentVolumeClaim) -> bool {
    matches!((request(claim), request(tpl)), (Some(c), Some(t)) if c < t)
}

/// Upstream `CompareWithCheckFn(claim, template, IsPVCNeedExpand)`'s "matched": compatible
/// and big enough.
pub fn matches(claim: &PersistentVolumeClaim, tpl: &PersistentVolumeClaim) -> bool {
    compatible_without_size(claim, tpl) && !needs_expand(claim, tpl)
}

/// Upstream `IsPVCCompatibleAndReady`: (requests at least the template's storage, capacity
/// reached the request).
pub fn compatible_and_ready(
    claim: &PersistentVolumeClaim,
    tpl: &PersistentVolumeClaim,
) -> (bool, bool) {
    if !compatible_without_size(claim, tpl) {
        return (false, false);
    }
    let compatible = matches!((request(claim), request(tpl)), (Some(c), Some(t)) if c >= t);
    let ready = matches!((capacity(claim), request(claim)), (Some(c), Some(r)) if c >= r);
    (compatible, ready)
}

/// Upstream `IsPatchPVCCompleted`: compatible, and ready or waiting only on the file system
/// (`FileSystemResizePending`, which the Pod's next start finishes).
pub fn resize_completed(claim: &PersistentVolumeClaim, tpl: &PersistentVolumeClaim) -> bool {
    let (compatible, ready) = compatible_and_ready(claim, tpl);
    compatible
        && (ready
            || claim
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "FileSystemResizePending" && c.status == "True")
                }))
}

/// The live claims of `pod` with their templates (upstream `handlePVCWithCustomFn`): a claim
/// not made yet or being deleted is left out.
pub fn of_pod<'a>(
    sts: &'a StatefulSet,
    pod: &Pod,
    claims: &'a ClaimsByName,
) -> Vec<(&'a PersistentVolumeClaim, &'a PersistentVolumeClaim)> {
    let set = sts.name_any();
    let Some(ord) = ordinal_of(&set, podutil::name(pod)) else {
        return Vec::new();
    };
    sts.spec
        .volume_claim_templates
        .iter()
        .filter_map(|t| {
            let c = claims.get(&claim_name(t.metadata.name.as_deref()?, &set, ord))?;
            c.metadata
                .deletion_timestamp
                .is_none()
                .then_some((c.as_ref(), t))
        })
        .collect()
}

/// Every claim of `pod` has reached its request (upstream `IsOwnedPVCsReady`).
pub fn pod_claims_ready(sts: &StatefulSet, pod: &Pod, claims: &ClaimsByName) -> bool {
    of_pod(sts, pod, claims)
        .into_iter()
        .all(|(c, t)| compatible_and_ready(c, t).1)
}

/// Every claim of `pod` matches its template (upstream `IsClaimsCompatible`).
pub fn pod_claims_match(sts: &StatefulSet, pod: &Pod, claims: &ClaimsByName) -> bool {
    of_pod(sts, pod, claims)
        .into_iter()
        .all(|(c, t)| matches(c, t))
}

/// `status.volumeClaims` (upstream `updatePVCStatus`): per template, the Pods whose claim is
/// compatible, and of those the ones whose claim is ready. Claims kept for Pods that are gone
/// are not counted.
pub fn volume_claim_status(
    sts: &StatefulSet,
    pods: &[&Pod],
    claims: &ClaimsByName,
) -> Vec<VolumeClaimStatus> {
    let mut out: Vec<VolumeClaimStatus> = sts
        .spec
        .volume_claim_templates
        .iter()
        .map(|t| VolumeClaimStatus {
            volume_claim_name: t.metadata.name.clone().unwrap_or_default(),
            ..Default::default()
        })
        .collect();
    for pod in pods {
        for (claim, tpl) in of_pod(sts, pod, claims) {
            let (compatible, ready) = compatible_and_ready(claim, tpl);
            let Some(st) = out
                .iter_mut()
                .find(|s| Some(&s.volume_claim_name) == tpl.metadata.name.as_ref())
            else {
                continue;
            };
            if compatible {
                st.compatible_replicas += 1;
                if ready {
                    st.compatible_ready_replicas += 1;
                }
            }
        }
    }
    out
}

/// `claim` with the template's storage request and limit and the owner annotation (upstream
/// `resizeClaim`), as a merge patch.
pub fn resize_patch(sts: &StatefulSet, tpl: &PersistentVolumeClaim) -> serde_json::Value {
    let resources = tpl
        .spec
        .as_ref()
        .and_then(|s| s.resources.clone())
        .unwrap_or_default();
    serde_json::json!({
        "metadata": {"annotations": {kruise_api::keys::PVC_OWNED_BY_ASTS_ANNOTATION: sts.name_any()}},
        "spec": {"resources": resources},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        PersistentVolumeClaimCondition, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus,
        VolumeResourceRequirements,
    };

    fn q(s: &str) -> BTreeMap<String, Quantity> {
        BTreeMap::from([("storage".to_owned(), Quantity(s.to_owned()))])
    }

    fn claim(name: &str, sc: &str, request: &str, cap: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                storage_class_name: Some(sc.into()),
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(q(request)),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: cap.map(|c| PersistentVolumeClaimStatus {
                capacity: Some(q(c)),
                ..Default::default()
            }),
        }
    }

    fn set(templates: Vec<PersistentVolumeClaim>) -> StatefulSet {
        let mut s = StatefulSet::new("web", Default::default());
        s.metadata.namespace = Some("ns".into());
        s.spec.volume_claim_templates = templates;
        s
    }

    fn pod(name: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p
    }

    #[test]
    fn compatible_ready_and_completed_read_request_capacity_and_class() {
        let tpl = claim("data", "fast", "2Gi", None);
        // Smaller request: not compatible, needs expansion.
        let small = claim("data-web-0", "fast", "1Gi", Some("1Gi"));
        assert_eq!(compatible_and_ready(&small, &tpl), (false, true));
        assert!(needs_expand(&small, &tpl) && !matches(&small, &tpl));
        // Patched, the resizer not done yet; 2048Mi is 2Gi.
        let patched = claim("data-web-0", "fast", "2048Mi", Some("1Gi"));
        assert_eq!(compatible_and_ready(&patched, &tpl), (true, false));
        assert!(matches(&patched, &tpl) && !resize_completed(&patched, &tpl));
        let mut pending = patched.clone();
        if let Some(st) = pending.status.as_mut() {
            st.conditions = Some(vec![PersistentVolumeClaimCondition {
                type_: "FileSystemResizePending".into(),
                status: "True".into(),
                ..Default::default()
            }]);
        }
        assert!(resize_completed(&pending, &tpl));
        let done = claim("data-web-0", "fast", "2Gi", Some("2Gi"));
        assert!(resize_completed(&done, &tpl));
        // Another class: never compatible, never patched.
        let other = claim("data-web-0", "slow", "5Gi", Some("5Gi"));
        assert_eq!(compatible_and_ready(&other, &tpl), (false, false));
        assert!(!matches(&other, &tpl));
    }

    #[test]
    fn status_counts_the_claims_of_live_pods_per_template() {
        let sts = set(vec![
            claim("data", "fast", "2Gi", None),
            claim("logs", "fast", "1Gi", None),
        ]);
        let claims = by_name(
            [
                claim("data-web-0", "fast", "2Gi", Some("2Gi")),
                claim("data-web-1", "fast", "2Gi", Some("1Gi")),
                claim("data-web-2", "fast", "1Gi", Some("1Gi")),
                claim("logs-web-0", "fast", "1Gi", Some("1Gi")),
                // Kept for a Pod that is gone: not counted.
                claim("data-web-5", "fast", "2Gi", Some("2Gi")),
            ]
            .into_iter()
            .map(Arc::new)
            .collect(),
            "ns",
        );
        let pods = [pod("web-0"), pod("web-1"), pod("web-2")];
        let refs: Vec<&Pod> = pods.iter().collect();
        let st = volume_claim_status(&sts, &refs, &claims);
        let row = |n: &str, c, r| VolumeClaimStatus {
            volume_claim_name: n.into(),
            compatible_replicas: c,
            compatible_ready_replicas: r,
        };
        assert_eq!(st, vec![row("data", 2, 1), row("logs", 1, 1)]);
        assert!(pod_claims_ready(&sts, &pods[0], &claims));
        assert!(!pod_claims_ready(&sts, &pods[1], &claims));
        assert!(pod_claims_match(&sts, &pods[1], &claims));
        assert!(!pod_claims_match(&sts, &pods[2], &claims));
    }
}
