//! Pure Pod generation: a new Pod of a revision and the PVCs of its instance (upstream
//! `NewPodsFromRevision` and `newPVCs` in the scale control).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use kruise_api::apps::v1beta1::CloneSet;
use kruise_api::appspub::{LifecycleStateType, set_lifecycle_state};
use kruise_api::keys;
use kube::{Resource, ResourceExt};

use super::hooks::CloneSetPodHooks;
use crate::inplace::InPlaceHooks;

/// The instance id of a Pod or PVC of the CloneSet (its `apps.kruise.io/cloneset-instance-id`).
pub(super) fn instance_id<K: Resource>(obj: &K) -> Option<&str> {
    obj.meta()
        .labels
        .as_ref()?
        .get(keys::CLONESET_INSTANCE_ID_LABEL)
        .map(String::as_str)
}

/// A new pod of `cs` at `revision_name` from `tpl`, named `{cs}-{id}`: revision and instance-id
/// labels, lifecycle PreparingNormal, the InPlaceUpdateReady readiness gate, and volumes for
/// the instance's PVCs. `hooks` write the revision labels.
pub fn new_pod(
    hooks: &CloneSetPodHooks,
    cs: &CloneSet,
    tpl: &PodTemplateSpec,
    revision_name: &str,
    id: &str,
    now: Timestamp,
) -> Pod {
    let name = cs.name_any();
    let meta = tpl.metadata.clone().unwrap_or_default();
    let mut pod = Pod::default();
    pod.metadata.name = Some(format!("{name}-{id}"));
    pod.metadata.namespace = cs.namespace();
    pod.metadata.labels = meta.labels;
    pod.metadata.annotations = meta.annotations;
    pod.metadata.finalizers = meta.finalizers;
    pod.metadata.owner_references = cs.controller_owner_ref(&()).map(|o| vec![o]);
    pod.spec = tpl.spec.clone();
    hooks.write_revision(&mut pod, revision_name);
    pod.metadata
        .labels
        .get_or_insert_default()
        .insert(keys::CLONESET_INSTANCE_ID_LABEL.to_string(), id.to_string());
    set_lifecycle_state(&mut pod.metadata, LifecycleStateType::PreparingNormal, now);
    pod.spec.get_or_insert_default();
    kruise_api::pod::add_readiness_gate(&mut pod, keys::INPLACE_UPDATE_READY);
    let spec = pod.spec.get_or_insert_default();
    // Volumes from volumeClaimTemplates point at this instance's PVCs and replace template
    // volumes of the same name.
    let claims: Vec<(String, String)> = cs
        .spec
        .volume_claim_templates
        .iter()
        .map(|t| {
            let tname = t.metadata.name.clone().unwrap_or_default();
            (tname.clone(), format!("{tname}-{name}-{id}"))
        })
        .collect();
    if !claims.is_empty() {
        let mut volumes: Vec<Volume> = claims
            .iter()
            .map(|(vol, claim)| Volume {
                name: vol.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim.clone(),
                    read_only: Some(false),
                }),
                ..Default::default()
            })
            .collect();
        for v in spec.volumes.take().unwrap_or_default() {
            if !claims.iter().any(|(n, _)| *n == v.name) {
                volumes.push(v);
            }
        }
        spec.volumes = Some(volumes);
    }
    pod
}

/// The PVCs of instance `id`: `{template}-{cs}-{id}`, labelled like the pod, owned by `cs`.
pub fn new_pvcs(cs: &CloneSet, id: &str) -> Vec<PersistentVolumeClaim> {
    let name = cs.name_any();
    cs.spec
        .volume_claim_templates
        .iter()
        .map(|t| {
            let mut c = t.clone();
            let tname = t.metadata.name.clone().unwrap_or_default();
            c.metadata.name = Some(format!("{tname}-{name}-{id}"));
            c.metadata.namespace = cs.namespace();
            let labels = c.metadata.labels.get_or_insert_default();
            for (k, v) in cs.spec.selector.match_labels.iter().flatten() {
                labels.insert(k.clone(), v.clone());
            }
            labels.insert(keys::CLONESET_INSTANCE_ID_LABEL.to_string(), id.to_string());
            c.metadata.owner_references = cs.controller_owner_ref(&()).map(|o| vec![o]);
            c.status = None;
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::spec::tests::cs;
    use super::*;

    #[test]
    fn new_pods_carry_identity_revision_gate_and_volumes() {
        use k8s_openapi::api::core::v1::{Container, PodSpec};
        let mut c = cs();
        c.metadata.uid = Some("cs-uid".into());
        let mut claim = PersistentVolumeClaim::default();
        claim.metadata.name = Some("data".into());
        c.spec.volume_claim_templates = vec![claim];
        let mut tpl = c.spec.template.clone();
        tpl.spec = Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some("img:v1".into()),
                ..Default::default()
            }],
            volumes: Some(vec![Volume {
                name: "data".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let p = new_pod(
            &CloneSetPodHooks::default(),
            &c,
            &tpl,
            "demo-abc12",
            "x7k2q",
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(p.metadata.name.as_deref(), Some("demo-x7k2q"));
        assert_eq!(p.metadata.namespace.as_deref(), Some("ns"));
        let l = p.metadata.labels.as_ref().expect("labels");
        assert_eq!(l[keys::CONTROLLER_REVISION_HASH_LABEL], "demo-abc12");
        assert_eq!(l[keys::POD_TEMPLATE_HASH_LABEL], "abc12");
        assert_eq!(l[keys::CLONESET_INSTANCE_ID_LABEL], "x7k2q");
        assert_eq!(l[keys::LIFECYCLE_STATE_LABEL], "PreparingNormal");
        assert_eq!(l["app"], "demo");
        let owner = &p.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("CloneSet", "cs-uid", Some(true))
        );
        let spec = p.spec.as_ref().expect("spec");
        let gates = spec.readiness_gates.as_ref().expect("gates");
        assert_eq!(gates.len(), 1);
        assert_eq!(gates[0].condition_type, keys::INPLACE_UPDATE_READY);
        let vols = spec.volumes.as_ref().expect("volumes");
        // The claim replaces the template volume of the same name.
        assert_eq!(vols.len(), 1);
        assert_eq!(
            vols[0]
                .persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.as_str()),
            Some("data-demo-x7k2q")
        );
        let pvcs = new_pvcs(&c, "x7k2q");
        assert_eq!(pvcs[0].metadata.name.as_deref(), Some("data-demo-x7k2q"));
        let pl = pvcs[0].metadata.labels.as_ref().expect("labels");
        assert_eq!(pl[keys::CLONESET_INSTANCE_ID_LABEL], "x7k2q");
        assert_eq!(pl["app"], "demo");
    }

    #[test]
    fn timestamps_are_rfc3339_seconds() {
        let t = Timestamp::from_second(1_700_000_000).expect("ts");
        assert_eq!(
            kruise_api::appspub::lifecycle_timestamp_value(t),
            "2023-11-14T22:13:20Z"
        );
    }
}
