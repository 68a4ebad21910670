//! `/mutate-pod`: Pod CREATE mutation.
//!
//! Order follows upstream's pod handler: the `KruisePodReady` readiness gate first, then the
//! SidecarSet injection ([`crate::sidecarset::inject`]), then the container launch-priority
//! barrier (which must see the injected containers).

use k8s_openapi::api::core::v1::{Container, Pod};
use kruise_api::appspub::launch_priority::{self, InvalidLaunchPriority};
use kube::core::admission::Operation;
use rand::Rng;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::review::{Outcome, Request, diff};
use crate::sidecarset::InjectContext;
use kruise_api::keys;

/// Handles one decoded Pod admission request without SidecarSets (the server uses
/// [`crate::sidecarset::mutate_pod`], which reads them and calls [`mutate_with`]).
pub fn mutate(req: &Request) -> Outcome {
    mutate_with(req, &InjectContext::default())
}

/// Handles one decoded Pod admission request, injecting the SidecarSets of `ctx`.
pub fn mutate_with(req: &Request, ctx: &InjectContext) -> Outcome {
    if req.operation != Operation::Create || req.resource != "pods" || req.sub_resource.is_some() {
        return Outcome::Allow;
    }
    let Some(raw) = &req.object else {
        return Outcome::bad_request("pod CREATE request carries no object");
    };
    let mut pod: Pod = match serde_json::from_value(raw.clone()) {
        Ok(p) => p,
        Err(e) => return Outcome::bad_request(format!("cannot decode Pod: {e}")),
    };
    // Diff against the re-encoded pod so only our own changes end up in the patch.
    let before = match serde_json::to_value(&pod) {
        Ok(v) => v,
        Err(e) => return Outcome::bad_request(format!("cannot encode Pod: {e}")),
    };
    let mut changed = inject_readiness_gate(&mut pod, ctx.readiness_gate_for_all);
    let now = Time(jiff::Timestamp::now());
    match crate::sidecarset::inject::inject(&mut pod, ctx, &now) {
        // Sidecar upgrades take the Pod out of Service through this gate, as upstream.
        Ok(true) => {
            kruise_api::pod::add_readiness_gate(&mut pod, keys::KRUISE_POD_READY);
            changed = true;
        }
        Ok(false) => {}
        Err(e) => return Outcome::invalid(e.to_string()),
    }
    match inject_launch_priority(&mut pod) {
        Ok(c) => changed |= c,
        Err(invalid) => return Outcome::invalid(invalid.to_string()),
    }
    if !changed {
        return Outcome::Allow;
    }
    match serde_json::to_value(&pod) {
        Ok(after) => Outcome::Patch(diff(&before, &after)),
        Err(e) => Outcome::bad_request(format!("cannot encode mutated Pod: {e}")),
    }
}

/// Whether the pod's controller owner belongs to `apps.kruise.io` (any version).
pub fn owned_by_kruise(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .is_some_and(|o| o.api_version.split('/').next() == Some(keys::APPS_GROUP))
}

/// Adds the `KruisePodReady` readiness gate (once) to Kruise-owned pods, or to every pod when
/// `for_all` (the `KruisePodReadinessGate` feature gate).
pub fn inject_readiness_gate(pod: &mut Pod, for_all: bool) -> bool {
    (for_all || owned_by_kruise(pod))
        && kruise_api::pod::add_readiness_gate(pod, keys::KRUISE_POD_READY)
}

/// Priorities per container in spec order, or `None` when the pod needs no ordering; the error
/// names the container whose `KRUISE_CONTAINER_PRIORITY` is not an integer (upstream refuses
/// the pod).
pub fn launch_priorities(pod: &Pod) -> Result<Option<Vec<i64>>, InvalidLaunchPriority> {
    launch_priority::declared_priorities(pod)
}

/// Adds the `KRUISE_CONTAINER_BARRIER` env to every container when launch priority is asked for.
///
/// The barrier ConfigMap is named after the pod, so a pod with only `generateName` gets its name
/// chosen here (as upstream does); the ConfigMap itself is created by the launch-priority
/// controller once the pod exists, not by the webhook (webhooks must stay side-effect free).
pub fn inject_launch_priority(pod: &mut Pod) -> Result<bool, InvalidLaunchPriority> {
    let Some(priorities) = launch_priorities(pod)? else {
        return Ok(false);
    };
    let name = match pod.metadata.name.as_deref().filter(|n| !n.is_empty()) {
        Some(n) => n.to_owned(),
        None => match pod
            .metadata
            .generate_name
            .as_deref()
            .filter(|g| !g.is_empty())
        {
            Some(base) => {
                let generated = generate_name(base);
                pod.metadata.name = Some(generated.clone());
                generated
            }
            // Neither name nor generateName: the API server will reject the pod anyway.
            None => return Ok(false),
        },
    };
    let Some(spec) = pod.spec.as_mut() else {
        return Ok(false);
    };
    let mut changed = false;
    for (c, p) in spec.containers.iter_mut().zip(priorities) {
        changed |= add_barrier_env(c, &name, p);
    }
    Ok(changed)
}

fn add_barrier_env(c: &mut Container, pod_name: &str, priority: i64) -> bool {
    // Re-invocation must not add a second barrier.
    if launch_priority::has_barrier_env(c) {
        return false;
    }
    c.env
        .get_or_insert_with(Vec::new)
        .push(launch_priority::barrier_env(pod_name, priority));
    true
}

/// Same scheme as the API server's name generator: base truncated so the result fits 63
/// characters, plus five characters from an alphabet without vowels.
pub fn generate_name(base: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    const MAX_BASE: usize = 63 - 5;
    let mut base = base.to_owned();
    if base.len() > MAX_BASE {
        let mut cut = MAX_BASE;
        while !base.is_char_boundary(cut) {
            cut -= 1;
        }
        base.truncate(cut);
    }
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    base + &suffix
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::admit;
    use crate::review::tests::{response, review_body};
    use serde_json::{Value, json};

    fn pod(owner_api: Option<&str>, containers: Value, annotations: Value) -> Value {
        let owners = match owner_api {
            Some(api) => json!([{"apiVersion": api, "kind": "CloneSet", "name": "cs",
                "uid": "u", "controller": true}]),
            None => json!(null),
        };
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "ownerReferences": owners,
                "annotations": annotations},
            "spec": {"containers": containers}})
    }

    fn run(obj: Value) -> Value {
        let body = review_body("CREATE", ("", "v1", "Pod"), "pods", Some(obj.clone()), None);
        let resp = response(&admit(&body, mutate));
        assert_eq!(resp["allowed"], true, "{resp}");
        let mut patched = obj;
        if let Some(bytes) = patch_bytes(&resp["patch"]) {
            let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("patch");
            json_patch::patch(&mut patched, &patch).expect("patch applies to the raw object");
        }
        patched
    }

    /// kube-core encodes the patch bytes as a JSON array of numbers (Go's decoder accepts it
    /// for `[]byte`).
    fn patch_bytes(v: &Value) -> Option<Vec<u8>> {
        v.as_array()?
            .iter()
            .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
            .collect()
    }

    #[test]
    fn readiness_gate_injected_for_kruise_owner() {
        let out = run(pod(
            Some("apps.kruise.io/v1beta1"),
            json!([{"name": "a", "image": "x"}]),
            json!(null),
        ));
        assert_eq!(
            out["spec"]["readinessGates"],
            json!([{"conditionType": "KruisePodReady"}])
        );
    }

    #[test]
    fn readiness_gate_not_injected_for_other_owner() {
        let out = run(pod(
            Some("apps/v1"),
            json!([{"name": "a", "image": "x"}]),
            json!(null),
        ));
        assert!(out["spec"].get("readinessGates").is_none());
        let out = run(pod(None, json!([{"name": "a", "image": "x"}]), json!(null)));
        assert!(out["spec"].get("readinessGates").is_none());
    }

    #[test]
    fn kruise_pod_readiness_gate_injects_into_every_pod() {
        for (owner, for_all, want) in [
            (None, false, false),
            (None, true, true),
            (Some("apps/v1"), true, true),
            (Some("apps.kruise.io/v1beta1"), false, true),
        ] {
            let mut p: Pod = serde_json::from_value(pod(
                owner,
                json!([{"name": "a", "image": "x"}]),
                json!(null),
            ))
            .expect("pod");
            assert_eq!(
                inject_readiness_gate(&mut p, for_all),
                want,
                "{owner:?} for_all={for_all}"
            );
        }
    }

    #[test]
    fn readiness_gate_not_duplicated() {
        let mut p = pod(
            Some("apps.kruise.io/v1alpha1"),
            json!([{"name": "a", "image": "x"}]),
            json!(null),
        );
        p["spec"]["readinessGates"] = json!([{"conditionType": "KruisePodReady"}]);
        let out = run(p);
        assert_eq!(
            out["spec"]["readinessGates"].as_array().map(Vec::len),
            Some(1)
        );
    }

    fn barrier(c: &Value) -> Option<Value> {
        c["env"]
            .as_array()?
            .iter()
            .find(|e| e["name"] == "KRUISE_CONTAINER_BARRIER")
            .cloned()
    }

    #[test]
    fn ordered_annotation_injects_descending_barriers() {
        let out = run(pod(
            None,
            json!([{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]),
            json!({"apps.kruise.io/container-launch-priority": "Ordered"}),
        ));
        let cs = out["spec"]["containers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            barrier(&cs[0]),
            Some(json!({"name": "KRUISE_CONTAINER_BARRIER",
                "valueFrom": {"configMapKeyRef": {"name": "p-barrier", "key": "p_0"}}}))
        );
        assert_eq!(
            barrier(&cs[1]).map(|b| b["valueFrom"]["configMapKeyRef"]["key"].clone()),
            Some(json!("p_-1"))
        );
    }

    #[test]
    fn priority_env_injects_barriers_keeping_existing_env() {
        let out = run(pod(
            None,
            json!([
                {"name": "a", "image": "x", "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "value": "10"}]},
                {"name": "b", "image": "y"}
            ]),
            json!(null),
        ));
        let cs = out["spec"]["containers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(cs[0]["env"][0]["name"], "KRUISE_CONTAINER_PRIORITY");
        assert_eq!(
            barrier(&cs[0]).map(|b| b["valueFrom"]["configMapKeyRef"]["key"].clone()),
            Some(json!("p_10"))
        );
        assert_eq!(
            barrier(&cs[1]).map(|b| b["valueFrom"]["configMapKeyRef"]["key"].clone()),
            Some(json!("p_0"))
        );
    }

    #[test]
    fn equal_priorities_or_single_container_inject_nothing() {
        let env = json!([{"name": "KRUISE_CONTAINER_PRIORITY", "value": "5"}]);
        let out = run(pod(
            None,
            json!([{"name": "a", "image": "x", "env": env}, {"name": "b", "image": "y", "env": env}]),
            json!(null),
        ));
        assert!(barrier(&out["spec"]["containers"][0]).is_none());
        let out = run(pod(
            None,
            json!([{"name": "a", "image": "x"}]),
            json!({"apps.kruise.io/container-launch-priority": "Ordered"}),
        ));
        assert!(barrier(&out["spec"]["containers"][0]).is_none());
    }

    #[test]
    fn generate_name_pod_gets_a_name_for_its_barrier() {
        let mut p = pod(
            None,
            json!([{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]),
            json!({"apps.kruise.io/container-launch-priority": "Ordered"}),
        );
        p["metadata"]["name"] = Value::Null;
        p["metadata"]["generateName"] = json!("web-");
        let out = run(p);
        let name = out["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
        assert_eq!(
            barrier(&out["spec"]["containers"][0])
                .map(|b| b["valueFrom"]["configMapKeyRef"]["name"].clone()),
            Some(json!(format!("{name}-barrier")))
        );
    }

    #[test]
    fn bad_priority_is_denied_naming_the_container() {
        let p = pod(
            None,
            json!([
                {"name": "a", "image": "x", "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "value": "high"}]},
                {"name": "b", "image": "y"}
            ]),
            json!(null),
        );
        let body = review_body("CREATE", ("", "v1", "Pod"), "pods", Some(p), None);
        let resp = response(&admit(&body, mutate));
        assert_eq!(resp["allowed"], false);
        assert_eq!(
            resp["status"]["message"],
            "spec.containers[0].env[KRUISE_CONTAINER_PRIORITY]: Invalid value: \"high\": must be an integer"
        );
    }

    #[test]
    fn update_is_ignored() {
        let p = pod(
            Some("apps.kruise.io/v1beta1"),
            json!([{"name": "a"}]),
            json!(null),
        );
        let body = review_body(
            "UPDATE",
            ("", "v1", "Pod"),
            "pods",
            Some(p.clone()),
            Some(p),
        );
        let resp = response(&admit(&body, mutate));
        assert_eq!(resp["allowed"], true);
        assert!(resp.get("patch").is_none());
    }

    #[test]
    fn long_generate_name_is_truncated() {
        let n = generate_name(&"x".repeat(80));
        assert_eq!(n.len(), 63);
    }
}
