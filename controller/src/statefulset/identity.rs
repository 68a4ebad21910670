//! Pure identity of an Advanced StatefulSet's pods (upstream `stateful_set_utils.go`): ordinals
//! and their range, pod and PVC names, and the Pod and PVCs stamped out for one ordinal.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_api::apps::v1beta1::{
    InvalidReserveOrdinal, PersistentVolumeClaimRetentionPolicyType, StatefulSet,
};
use kruise_api::appspub::{LifecycleStateType, set_lifecycle_state};
use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys::{self, k8s};
use kube::{Resource, ResourceExt};

use super::hooks::AstsHooks;
use crate::inplace::InPlaceHooks;

/// The ordinals a set's replicas take: `[start, end)` minus the reserved ones, with `end`
/// pushed past reserved ordinals until `replicas` ordinals are free (upstream
/// `getStatefulSetReplicasRange`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrdinalRange {
    pub start: i32,
    pub end: i32,
    pub reserved: BTreeSet<i32>,
}

impl OrdinalRange {
    /// `spec.ordinals.start` counts only with `StatefulSetStartOrdinal` (upstream
    /// `getStartOrdinal`); without it ordinals start at 0.
    pub fn of(sts: &StatefulSet, gates: &FeatureGates) -> Result<Self, InvalidReserveOrdinal> {
        let reserved: BTreeSet<i32> = sts.spec.reserved_ordinals()?.into_iter().collect();
        let start = if gates.enabled(Gate::StatefulSetStartOrdinal) {
            sts.spec.start_ordinal()
        } else {
            0
        };
        let mut end = start;
        let mut free = 0;
        while free < sts.spec.replicas().max(0) {
            if !reserved.contains(&end) {
                free += 1;
            }
            end += 1;
        }
        Ok(Self {
            start,
            end,
            reserved,
        })
    }

    /// Whether a pod with this ordinal is one of the replicas (else it is condemned).
    pub fn contains(&self, ordinal: i32) -> bool {
        (self.start..self.end).contains(&ordinal) && !self.reserved.contains(&ordinal)
    }

    /// Slots from `start` to `end`, reserved ones included (they stay empty).
    pub fn slots(&self) -> usize {
        usize::try_from(self.end - self.start).unwrap_or(0)
    }
}

/// `{set}-{ordinal}`.
pub fn pod_name(set: &str, ordinal: i32) -> String {
    format!("{set}-{ordinal}")
}

/// `{claim}-{set}-{ordinal}` (upstream `getPersistentVolumeClaimName`).
pub fn claim_name(claim: &str, set: &str, ordinal: i32) -> String {
    format!("{claim}-{set}-{ordinal}")
}

/// The ordinal in a pod name `{set}-{ordinal}`; `None` for a name of another shape (upstream
/// `getParentNameAndOrdinal`, which such pods are ignored by).
pub fn ordinal_of(set: &str, pod_name: &str) -> Option<i32> {
    let rest = pod_name.strip_prefix(set)?.strip_prefix('-')?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest.parse().ok()
}

/// The ordinal of a PVC `{claim}-{set}-{ordinal}` made from one of the set's templates.
pub fn claim_ordinal(sts: &StatefulSet, pvc_name: &str) -> Option<i32> {
    let set = sts.name_any();
    sts.spec.volume_claim_templates.iter().find_map(|t| {
        let claim = t.metadata.name.as_deref()?;
        ordinal_of(&set, pvc_name.strip_prefix(claim)?.strip_prefix('-')?)
    })
}

/// A new pod of `sts` at `ordinal` from `tpl` (upstream `newVersionedStatefulSetPod`): identity
/// labels, hostname and subdomain, revision label, lifecycle state, the InPlaceUpdateReady
/// readiness gate and volumes for its PVCs.
pub fn new_pod(
    sts: &StatefulSet,
    tpl: &PodTemplateSpec,
    revision_name: &str,
    ordinal: i32,
    now: jiff::Timestamp,
    gates: &FeatureGates,
) -> Pod {
    let set = sts.name_any();
    let name = pod_name(&set, ordinal);
    let meta = tpl.metadata.clone().unwrap_or_default();
    let mut pod = Pod::default();
    pod.metadata.name = Some(name.clone());
    pod.metadata.namespace = sts.namespace();
    pod.metadata.labels = meta.labels;
    pod.metadata.annotations = meta.annotations;
    pod.metadata.finalizers = meta.finalizers;
    pod.metadata.owner_references = sts.controller_owner_ref(&()).map(|o| vec![o]);
    pod.spec = tpl.spec.clone();
    AstsHooks.write_revision(&mut pod, revision_name);
    let labels = pod.metadata.labels.get_or_insert_default();
    labels.insert(k8s::STATEFULSET_POD_NAME_LABEL.to_string(), name.clone());
    if gates.enabled(Gate::PodIndexLabel) {
        labels.insert(k8s::POD_INDEX_LABEL.to_string(), ordinal.to_string());
    }
    // Pods wait in PreparingNormal only while a preNormal hook is set (upstream does the same).
    let state = if sts
        .spec
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_normal.as_ref())
        .is_some()
    {
        LifecycleStateType::PreparingNormal
    } else {
        LifecycleStateType::Normal
    };
    set_lifecycle_state(&mut pod.metadata, state, now);
    pod.spec.get_or_insert_default();
    kruise_api::pod::add_readiness_gate(&mut pod, keys::INPLACE_UPDATE_READY);
    let spec = pod.spec.get_or_insert_default();
    spec.hostname = Some(name);
    if !sts.spec.service_name.is_empty() {
        spec.subdomain = Some(sts.spec.service_name.clone());
    }
    let claims: Vec<(String, String)> = sts
        .spec
        .volume_claim_templates
        .iter()
        .filter_map(|t| t.metadata.name.clone())
        .map(|c| (c.clone(), claim_name(&c, &set, ordinal)))
        .collect();
    if !claims.is_empty() {
        // A claim replaces a template volume of the same name.
        let mut volumes: Vec<Volume> = spec
            .volumes
            .take()
            .unwrap_or_default()
            .into_iter()
            .filter(|v| !claims.iter().any(|(n, _)| *n == v.name))
            .collect();
        volumes.extend(claims.iter().map(|(vol, claim)| Volume {
            name: vol.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.clone(),
                read_only: None,
            }),
            ..Default::default()
        }));
        spec.volumes = Some(volumes);
    }
    pod
}

/// The PVCs of `ordinal` (upstream `getPersistentVolumeClaims`): named `{claim}-{set}-{ord}`,
/// labelled with the selector's labels; owned by the set only when `whenDeleted: Delete`, so the
/// garbage collector removes them with it and otherwise never. The policy counts only with
/// `StatefulSetAutoDeletePVC`, as upstream.
pub fn new_claims(
    sts: &StatefulSet,
    ordinal: i32,
    gates: &FeatureGates,
) -> Vec<PersistentVolumeClaim> {
    let set = sts.name_any();
    let delete_with_set = gates.enabled(Gate::StatefulSetAutoDeletePVC)
        && sts
            .spec
            .persistent_volume_claim_retention_policy
            .as_ref()
            .and_then(|p| p.when_deleted)
            == Some(PersistentVolumeClaimRetentionPolicyType::Delete);
    let owner = sts.controller_owner_ref(&()).map(|o| OwnerReference {
        controller: None,
        ..o
    });
    sts.spec
        .volume_claim_templates
        .iter()
        .filter_map(|t| {
            let claim = t.metadata.name.as_deref()?;
            let mut c = t.clone();
            c.metadata.name = Some(claim_name(claim, &set, ordinal));
            c.metadata.namespace = sts.namespace();
            let labels = c.metadata.labels.get_or_insert_default();
            for (k, v) in sts.spec.selector.match_labels.iter().flatten() {
                labels.insert(k.clone(), v.clone());
            }
            c.metadata.owner_references = if delete_with_set {
                owner.clone().map(|o| vec![o])
            } else {
                None
            };
            c.status = None;
            Some(c)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use kruise_api::apps::v1beta1::{
        StatefulSetOrdinals, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
    };

    pub(crate) fn sts(replicas: i32) -> StatefulSet {
        let mut s = StatefulSet::new(
            "web",
            StatefulSetSpec {
                replicas: Some(replicas),
                service_name: "web".into(),
                ..Default::default()
            },
        );
        s.metadata.namespace = Some("ns".into());
        s.metadata.uid = Some("uid-1".into());
        s
    }

    #[test]
    fn ordinal_range_skips_reserved_ordinals() {
        let rows: [(i32, i32, Vec<IntOrString>, Vec<i32>); 5] = [
            (3, 0, vec![], vec![0, 1, 2]),
            (3, 0, vec![IntOrString::Int(1)], vec![0, 2, 3]),
            (2, 0, vec![IntOrString::Int(1)], vec![0, 2]),
            (3, 5, vec![IntOrString::String("5-6".into())], vec![7, 8, 9]),
            (0, 0, vec![IntOrString::Int(0)], vec![]),
        ];
        for (replicas, start, reserve, want) in rows {
            let mut s = sts(replicas);
            s.spec.ordinals = Some(StatefulSetOrdinals { start });
            s.spec.reserve_ordinals = reserve.clone();
            let on = FeatureGates::default().with(Gate::StatefulSetStartOrdinal, true);
            let r = OrdinalRange::of(&s, &on).expect("valid");
            let got: Vec<i32> = (r.start..r.end).filter(|o| r.contains(*o)).collect();
            assert_eq!(
                got, want,
                "replicas {replicas} start {start} reserve {reserve:?}"
            );
        }
    }

    /// Upstream's default: `ordinals.start` is ignored without `StatefulSetStartOrdinal`.
    #[test]
    fn start_ordinal_counts_only_under_its_gate() {
        let mut s = sts(2);
        s.spec.ordinals = Some(StatefulSetOrdinals { start: 5 });
        let off = OrdinalRange::of(&s, &FeatureGates::default()).expect("valid");
        assert_eq!((off.start, off.end), (0, 2));
        let on = FeatureGates::default().with(Gate::StatefulSetStartOrdinal, true);
        let on = OrdinalRange::of(&s, &on).expect("valid");
        assert_eq!((on.start, on.end), (5, 7));
    }

    #[test]
    fn pod_index_label_and_claim_ownership_follow_their_gates() {
        let mut s = sts(3);
        let mut claim = PersistentVolumeClaim::default();
        claim.metadata.name = Some("data".into());
        s.spec.volume_claim_templates = vec![claim];
        s.spec.persistent_volume_claim_retention_policy =
            Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
                when_deleted: Some(PersistentVolumeClaimRetentionPolicyType::Delete),
                ..Default::default()
            });
        let defaults = FeatureGates::default();
        let off = FeatureGates::parse("PodIndexLabel=false,StatefulSetAutoDeletePVC=false")
            .expect("valid");
        let labels = |g: &FeatureGates| {
            new_pod(
                &s,
                &PodTemplateSpec::default(),
                "web-abc",
                2,
                jiff::Timestamp::UNIX_EPOCH,
                g,
            )
            .metadata
            .labels
            .unwrap_or_default()
        };
        assert_eq!(labels(&defaults)[k8s::POD_INDEX_LABEL], "2");
        assert!(!labels(&off).contains_key(k8s::POD_INDEX_LABEL));
        let owned = |g: &FeatureGates| new_claims(&s, 2, g)[0].metadata.owner_references.is_some();
        assert!(owned(&defaults), "whenDeleted: Delete owns the claim");
        assert!(!owned(&off), "gate off: the policy is ignored");
    }

    #[test]
    fn ordinals_parse_only_from_the_sets_own_names() {
        assert_eq!(ordinal_of("web", "web-0"), Some(0));
        assert_eq!(ordinal_of("web", "web-12"), Some(12));
        assert_eq!(ordinal_of("web", "web-x"), None);
        assert_eq!(ordinal_of("web", "webx-1"), None);
        assert_eq!(ordinal_of("web", "web-"), None);
        assert_eq!(ordinal_of("web", "web-1-2"), None);
        assert_eq!(ordinal_of("web-1", "web-1-2"), Some(2));
    }

    #[test]
    fn new_pod_has_identity_and_claims() {
        let mut s = sts(3);
        let mut claim = PersistentVolumeClaim::default();
        claim.metadata.name = Some("data".into());
        s.spec.volume_claim_templates = vec![claim];
        let pod = new_pod(
            &s,
            &PodTemplateSpec::default(),
            "web-abc",
            2,
            jiff::Timestamp::UNIX_EPOCH,
            &FeatureGates::default(),
        );
        assert_eq!(pod.metadata.name.as_deref(), Some("web-2"));
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels[k8s::STATEFULSET_POD_NAME_LABEL], "web-2");
        assert_eq!(labels[k8s::POD_INDEX_LABEL], "2");
        assert_eq!(labels[keys::CONTROLLER_REVISION_HASH_LABEL], "web-abc");
        let spec = pod.spec.expect("spec");
        assert_eq!(spec.hostname.as_deref(), Some("web-2"));
        assert_eq!(spec.subdomain.as_deref(), Some("web"));
        let vol = &spec.volumes.expect("volumes")[0];
        assert_eq!(
            vol.persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.as_str()),
            Some("data-web-2")
        );
        let pvcs = new_claims(&s, 2, &FeatureGates::default());
        assert_eq!(pvcs[0].metadata.name.as_deref(), Some("data-web-2"));
        assert!(
            pvcs[0].metadata.owner_references.is_none(),
            "Retain: not owned"
        );
        assert_eq!(claim_ordinal(&s, "data-web-2"), Some(2));
        assert_eq!(claim_ordinal(&s, "other-web-2"), None);
    }
}
