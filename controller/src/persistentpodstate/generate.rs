//! The PersistentPodState a StatefulSet's annotations ask for (upstream
//! `autoGeneratePersistentPodState`): `kruise.io/auto-generate-persistent-pod-state: "true"`
//! with a required or preferred topology annotation → a PersistentPodState of the
//! StatefulSet's name, controlled by it (so deleting the StatefulSet deletes it); a changed
//! annotation updates it; removed annotations delete it. Any other change of the StatefulSet
//! leaves an existing object's spec alone: after generation it is the user's to edit (upstream
//! regenerates only on the StatefulSet's creation and on a change of those annotations).
//!
//! Unlike upstream, an existing PersistentPodState of that name that the StatefulSet does not
//! control is left alone (upstream would overwrite or delete a user's object).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kruise_api::apps::v1alpha1::{PersistentPodState, generated_spec};
use kruise_api::policy::v1alpha1::TargetReference;
use kube::api::{Api, DeleteParams, PartialObjectMeta, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use super::context::Context;
use super::error::Error;
use super::plan::{GenerationKeys, generation_keys, regenerate};

/// What the generation reads: the controller's context and its PersistentPodState store, so
/// that a StatefulSet without the annotations costs no API call.
pub struct Generator {
    pub ctx: Arc<Context>,
    pub states: Store<PersistentPodState>,
    /// StatefulSet UID → the annotations the generation last acted on (see [`regenerate`]).
    acted: Mutex<HashMap<String, GenerationKeys>>,
}

impl Generator {
    pub fn new(ctx: Arc<Context>, states: Store<PersistentPodState>) -> Self {
        Self {
            ctx,
            states,
            acted: Mutex::default(),
        }
    }

    fn last_acted(&self, uid: &str) -> Option<GenerationKeys> {
        self.acted.lock().ok()?.get(uid).cloned()
    }

    fn record(&self, uid: String, keys: GenerationKeys) {
        if let Ok(mut m) = self.acted.lock() {
            m.insert(uid, keys);
        }
    }

    /// Forgets a deleted StatefulSet.
    pub fn forget(&self, uid: &str) {
        if let Ok(mut m) = self.acted.lock() {
            m.remove(uid);
        }
    }
}

/// The target a StatefulSet of kind `K` is, named `name`.
pub fn target_of<K: Resource<DynamicType = ()>>(name: &str) -> TargetReference {
    TargetReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: name.to_owned(),
    }
}

/// One reconcile of a StatefulSet of kind `K` (its metadata is all it needs).
pub async fn generate<K: Resource<DynamicType = ()>>(
    sts: Arc<PartialObjectMeta<K>>,
    gen_: Arc<Generator>,
) -> Result<Action, Error> {
    if sts.metadata.deletion_timestamp.is_some() {
        // Garbage collection deletes the PersistentPodState it controls.
        return Ok(Action::await_change());
    }
    let (ns, name) = (sts.namespace().unwrap_or_default(), sts.name_any());
    let uid = sts.metadata.uid.clone().unwrap_or_default();
    let empty = Default::default();
    let annotations = sts.metadata.annotations.as_ref().unwrap_or(&empty);
    let desired = generated_spec(target_of::<K>(&name), annotations);
    let keys_now = generation_keys(annotations);
    let last = gen_.last_acted(&uid);
    // Read from the store once it has listed: a generated object whose annotations were removed
    // while the manager was down is then still found and deleted.
    if gen_.states.wait_until_ready().await.is_err() {
        return Ok(Action::await_change());
    }
    let existing = gen_
        .states
        .get(&ObjectRef::new(&name).within(&ns))
        .map(|p| p.as_ref().clone());
    if desired.is_none() && existing.is_none() {
        gen_.record(uid, keys_now);
        return Ok(Action::await_change());
    }
    let api: Api<PersistentPodState> = Api::namespaced(gen_.ctx.client.clone(), &ns);
    let ours = existing.as_ref().is_some_and(|p| {
        p.owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && o.uid == uid)
    });
    match (desired, existing) {
        (Some(spec), None) => {
            let pps = PersistentPodState {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(ns.clone()),
                    owner_references: Some(vec![OwnerReference {
                        api_version: K::api_version(&()).into_owned(),
                        kind: K::kind(&()).into_owned(),
                        name: name.clone(),
                        uid: uid.clone(),
                        controller: Some(true),
                        block_owner_deletion: None,
                    }]),
                    ..Default::default()
                },
                spec,
                status: None,
            };
            match api.create(&PostParams::default(), &pps).await {
                Ok(_) => tracing::info!(namespace = ns, name, "generated a PersistentPodState"),
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        (Some(spec), Some(mut pps))
            if ours && pps.spec != spec && regenerate(last.as_ref(), &keys_now) =>
        {
            pps.spec = spec;
            api.replace(&name, &PostParams::default(), &pps).await?;
        }
        (Some(_), Some(_)) if !ours => {
            tracing::warn!(
                namespace = ns,
                name,
                "a PersistentPodState of the StatefulSet's name exists and is not generated from it; left alone"
            );
        }
        (None, Some(_)) if ours => match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        },
        _ => {}
    }
    gen_.record(uid, keys_now);
    Ok(Action::await_change())
}
