//! Container launch priority (upstream `apis/apps/pub/launch_priority.go` and
//! `pkg/util/containerlaunchpriority`): how a pod asks for its containers to start in order, and
//! the `KRUISE_CONTAINER_BARRIER` env through which the webhook, the launch-priority controller
//! and the in-place engine agree on each container's priority.
//!
//! Two readings, as upstream has them:
//! - [`declared_priorities`]: what the pod asks for (the Ordered annotation or the
//!   `KRUISE_CONTAINER_PRIORITY` env). The webhook turns it into barrier envs and refuses a pod
//!   whose env is not an integer.
//! - [`barrier_priority`]: what a running pod carries, read back from the barrier env's key.

use k8s_openapi::api::core::v1::{ConfigMapKeySelector, Container, EnvVar, EnvVarSource, Pod};

use crate::keys;

/// A `KRUISE_CONTAINER_PRIORITY` value that is not an integer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "spec.containers[{index}].env[{env}]: Invalid value: {value:?}: must be an integer",
    env = keys::ENV_CONTAINER_PRIORITY
)]
pub struct InvalidLaunchPriority {
    /// Index of the container in `spec.containers`.
    pub index: usize,
    /// The value found.
    pub value: String,
}

/// Name of the barrier ConfigMap of a pod: `{pod}-barrier`.
pub fn barrier_configmap_name(pod_name: &str) -> String {
    format!(
        "{pod_name}{}",
        keys::CONTAINER_LAUNCH_BARRIER_CONFIGMAP_SUFFIX
    )
}

/// Barrier key that lets containers of `priority` start: `p_{priority}` (upstream `GetKey`).
pub fn barrier_key(priority: i64) -> String {
    format!("{}{priority}", keys::CONTAINER_LAUNCH_BARRIER_KEY_PREFIX)
}

/// The barrier env the webhook injects into each container (upstream `GeneratePriorityEnv`).
pub fn barrier_env(pod_name: &str, priority: i64) -> EnvVar {
    EnvVar {
        name: keys::ENV_CONTAINER_BARRIER.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: barrier_configmap_name(pod_name),
                key: barrier_key(priority),
                optional: None,
            }),
            ..Default::default()
        }),
    }
}

/// Whether the container already carries a barrier env.
pub fn has_barrier_env(c: &Container) -> bool {
    c.env
        .iter()
        .flatten()
        .any(|e| e.name == keys::ENV_CONTAINER_BARRIER)
}

/// The priority a container waits on, read back from its barrier env (upstream
/// `GetContainerPriority`): `None` without a barrier env (or one without a configMapKeyRef).
///
/// As upstream, the priority is the key after its first two characters, and a key that does not
/// parse still marks the container as prioritised, at 0. The webhook never writes such a key.
pub fn barrier_priority(c: &Container) -> Option<i64> {
    let env = c
        .env
        .iter()
        .flatten()
        .find(|e| e.name == keys::ENV_CONTAINER_BARRIER)?;
    let key = &env.value_from.as_ref()?.config_map_key_ref.as_ref()?.key;
    Some(key.get(2..).and_then(|p| p.parse().ok()).unwrap_or(0))
}

/// Whether the pod asks for its containers to start in declaration order.
pub fn is_ordered(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::CONTAINER_LAUNCH_PRIORITY_ANNOTATION))
        .is_some_and(|v| v == keys::CONTAINER_LAUNCH_PRIORITY_ORDERED)
}

/// The priority of each container in spec order as the pod declares it, or `None` when it needs
/// no ordering (upstream webhook `containerLaunchPriorityInitialization` + `getPriority`):
/// - one container (or none) is never ordered;
/// - the Ordered annotation gives `0, -1, -2, …` and wins over any env;
/// - otherwise `KRUISE_CONTAINER_PRIORITY` (unset counts as 0; the last one wins when a container
///   sets it twice); equal priorities everywhere mean no ordering.
///
/// A value that is not an integer is an error, as upstream's webhook refuses such a pod.
/// Surrounding blanks are tolerated (Kruise-rs has always trimmed; upstream's `Atoi` does not).
pub fn declared_priorities(pod: &Pod) -> Result<Option<Vec<i64>>, InvalidLaunchPriority> {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    if containers.len() <= 1 {
        return Ok(None);
    }
    if is_ordered(pod) {
        return Ok(Some(
            (0..containers.len())
                .map(|i| -i64::try_from(i).unwrap_or(i64::MAX))
                .collect(),
        ));
    }
    let mut priorities = Vec::with_capacity(containers.len());
    for (index, c) in containers.iter().enumerate() {
        let mut p = 0;
        for e in c
            .env
            .iter()
            .flatten()
            .filter(|e| e.name == keys::ENV_CONTAINER_PRIORITY)
        {
            let value = e.value.as_deref().unwrap_or_default();
            p = value
                .trim()
                .parse::<i64>()
                .map_err(|_| InvalidLaunchPriority {
                    index,
                    value: value.to_owned(),
                })?;
        }
        priorities.push(p);
    }
    if priorities.iter().all(|p| *p == priorities[0]) {
        return Ok(None);
    }
    Ok(Some(priorities))
}

/// Whether the launch-priority controller marked the pod as fully released.
pub fn is_launch_completed(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::CONTAINER_LAUNCH_PRIORITY_COMPLETED_ANNOTATION))
        .is_some_and(|v| v == "true")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn container(env: Value) -> Container {
        serde_json::from_value(json!({"name": "c", "env": env})).expect("container")
    }

    fn barrier(key: &str) -> Value {
        json!([{"name": keys::ENV_CONTAINER_BARRIER,
            "valueFrom": {"configMapKeyRef": {"name": "p-barrier", "key": key}}}])
    }

    fn pod(annotations: Value, envs: &[Option<&str>]) -> Pod {
        let containers: Vec<Value> = envs
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Some(v) => json!({"name": format!("c{i}"),
                    "env": [{"name": keys::ENV_CONTAINER_PRIORITY, "value": v}]}),
                None => json!({"name": format!("c{i}")}),
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "p", "annotations": annotations},
            "spec": {"containers": containers},
        }))
        .expect("pod")
    }

    #[test]
    fn names() {
        assert_eq!(barrier_configmap_name("web-abcde"), "web-abcde-barrier");
        assert_eq!(barrier_key(-2), "p_-2");
        let env = barrier_env("p", 10);
        let r = env
            .value_from
            .and_then(|v| v.config_map_key_ref)
            .expect("configMapKeyRef");
        assert_eq!((r.name.as_str(), r.key.as_str()), ("p-barrier", "p_10"));
    }

    /// Upstream `GetContainerPriority`: the key after two characters; unparsable counts as 0.
    #[test]
    fn barrier_priority_table() {
        let cases: [(Value, Option<i64>); 7] = [
            (barrier("p_10"), Some(10)),
            (barrier("p_-3"), Some(-3)),
            (barrier("p_x"), Some(0)),
            (barrier("p"), Some(0)),
            // Upstream slices without checking the prefix.
            (barrier("x_1"), Some(1)),
            (
                json!([{"name": keys::ENV_CONTAINER_BARRIER, "value": "p_1"}]),
                None,
            ),
            (
                json!([{"name": keys::ENV_CONTAINER_PRIORITY, "value": "1"}]),
                None,
            ),
        ];
        for (env, want) in cases {
            let c = container(env.clone());
            assert_eq!(barrier_priority(&c), want, "{env}");
            assert_eq!(
                has_barrier_env(&c),
                env[0]["name"] == keys::ENV_CONTAINER_BARRIER
            );
        }
    }

    /// (annotations, KRUISE_CONTAINER_PRIORITY per container, expected).
    type Case = (
        Value,
        Vec<Option<&'static str>>,
        Result<Option<Vec<i64>>, InvalidLaunchPriority>,
    );

    #[test]
    fn declared_priorities_table() {
        let ordered = json!({keys::CONTAINER_LAUNCH_PRIORITY_ANNOTATION: "Ordered"});
        let cases: Vec<Case> = vec![
            (json!({}), vec![Some("1"), None], Ok(Some(vec![1, 0]))),
            (
                json!({}),
                vec![Some("-1"), Some(" 7 "), None],
                Ok(Some(vec![-1, 7, 0])),
            ),
            (json!({}), vec![Some("3"), Some("3")], Ok(None)),
            (json!({}), vec![None, None], Ok(None)),
            (json!({}), vec![Some("5")], Ok(None)),
            (
                ordered.clone(),
                vec![None, None, None],
                Ok(Some(vec![0, -1, -2])),
            ),
            (
                ordered.clone(),
                vec![Some("high"), None],
                Ok(Some(vec![0, -1])),
            ),
            (ordered, vec![None], Ok(None)),
            (
                json!({keys::CONTAINER_LAUNCH_PRIORITY_ANNOTATION: "ordered"}),
                vec![None, None],
                Ok(None),
            ),
            (
                json!({}),
                vec![None, Some("high")],
                Err(InvalidLaunchPriority {
                    index: 1,
                    value: "high".into(),
                }),
            ),
            (
                json!({}),
                vec![Some(""), None],
                Err(InvalidLaunchPriority {
                    index: 0,
                    value: String::new(),
                }),
            ),
        ];
        for (annotations, envs, want) in cases {
            assert_eq!(
                declared_priorities(&pod(annotations.clone(), &envs)),
                want,
                "{annotations} {envs:?}"
            );
        }
    }

    #[test]
    fn invalid_priority_message_names_the_container() {
        let e = InvalidLaunchPriority {
            index: 0,
            value: "high".into(),
        };
        assert_eq!(
            e.to_string(),
            "spec.containers[0].env[KRUISE_CONTAINER_PRIORITY]: Invalid value: \"high\": must be an integer"
        );
    }

    #[test]
    fn completed_annotation() {
        let done = json!({keys::CONTAINER_LAUNCH_PRIORITY_COMPLETED_ANNOTATION: "true"});
        assert!(is_launch_completed(&pod(done, &[None])));
        let other = json!({keys::CONTAINER_LAUNCH_PRIORITY_COMPLETED_ANNOTATION: "True"});
        assert!(!is_launch_completed(&pod(other, &[None])));
        assert!(!is_launch_completed(&pod(json!({}), &[None])));
    }
}
