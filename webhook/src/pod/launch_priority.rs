//! Container launch priority, upstream `containerLaunchPriorityInitialization`: the
//! `KRUISE_CONTAINER_BARRIER` env that makes containers start in priority order. Runs after
//! the SidecarSet injection, whose containers it must see.

use k8s_openapi::api::core::v1::{Container, Pod};
use kruise_api::appspub::launch_priority::{self, InvalidLaunchPriority};
use rand::Rng;

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
