//! The enhanced liveness probe on Pods (upstream
//! `pkg/webhook/pod/mutating/enhancedlivenessprobe_handler.go`), the `/mutate-pod` slot after
//! PersistentPodState, run only while the `EnhancedLivenessProbe` gate is on: a new Pod whose
//! controller is a Kruise workload and that carries `apps.kruise.io/using-enhanced-liveness:
//! "true"` loses every container's `livenessProbe`; the probes are kept, as a JSON list of
//! `{"name", "livenessProbe"}`, in `apps.kruise.io/container-probe-context`.
//!
//! That is all the release does: the kubelet no longer restarts those containers on a failed
//! probe, and nothing probes them again unless another component reads the annotation
//! (upstream's NodePodProbe-based controllers are not in v1.9.0).

use k8s_openapi::api::core::v1::{Pod, Probe};
use kruise_api::keys;
use serde::Serialize;

use super::readiness_gate::owned_by_kruise;

/// One entry of the backup annotation (upstream `containerLivenessProbe`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ContainerLivenessProbe<'a> {
    name: &'a str,
    liveness_probe: &'a Probe,
}

/// Whether the Pod asks for the enhanced liveness probe (upstream
/// `usingEnhancedLivenessProbe`): the annotation is exactly `"true"`.
pub fn using_enhanced_liveness(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::USING_ENHANCED_LIVENESS_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// Removes every container's liveness probe and records them in the backup annotation
/// (upstream `removeAndBackUpPodContainerLivenessProbe`): the annotation's value, or `None`
/// (Pod unchanged) when no container has one. Init and ephemeral containers are left alone.
pub fn remove_and_back_up(pod: &mut Pod) -> Result<Option<String>, serde_json::Error> {
    let Some(spec) = pod.spec.as_mut() else {
        return Ok(None);
    };
    let probes: Vec<(String, Probe)> = spec
        .containers
        .iter_mut()
        .filter_map(|c| Some((c.name.clone(), c.liveness_probe.take()?)))
        .collect();
    if probes.is_empty() {
        return Ok(None);
    }
    let entries: Vec<ContainerLivenessProbe<'_>> = probes
        .iter()
        .map(|(name, probe)| ContainerLivenessProbe {
            name,
            liveness_probe: probe,
        })
        .collect();
    let context = serde_json::to_string(&entries)?;
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            keys::CONTAINER_PROBE_CONTEXT_ANNOTATION.to_owned(),
            context.clone(),
        );
    Ok(Some(context))
}

/// The slot (upstream `enhancedLivenessProbeWhenPodCreate`; the caller runs it only for a Pod
/// CREATE with the gate on): whether it changed the Pod.
pub fn mutate(pod: &mut Pod) -> Result<bool, serde_json::Error> {
    if !owned_by_kruise(pod) || !using_enhanced_liveness(pod) {
        return Ok(false);
    }
    let context = remove_and_back_up(pod)?;
    if let Some(context) = &context {
        tracing::debug!(
            namespace = ?pod.metadata.namespace,
            name = ?pod.metadata.name,
            %context,
            "liveness probes moved to {}",
            keys::CONTAINER_PROBE_CONTEXT_ANNOTATION
        );
    }
    Ok(context.is_some())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, ExecAction, HTTPGetAction, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use serde_json::{Value, json};

    use super::*;

    fn http_probe() -> Probe {
        Probe {
            failure_threshold: Some(3),
            initial_delay_seconds: Some(3000),
            period_seconds: Some(100),
            success_threshold: Some(1),
            timeout_seconds: Some(5),
            http_get: Some(HTTPGetAction {
                path: Some("/health".into()),
                port: IntOrString::Int(7001),
                scheme: Some("HTTP".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn exec_probe() -> Probe {
        Probe {
            exec: Some(ExecAction {
                command: Some(vec!["/home/admin/liveness.sh".into()]),
            }),
            http_get: None,
            ..http_probe()
        }
    }

    fn container(name: &str, probe: Option<Probe>) -> Container {
        Container {
            name: name.into(),
            liveness_probe: probe,
            ..Default::default()
        }
    }

    fn pod(annotations: &[(&str, &str)], containers: Vec<Container>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("pod1".into()),
                namespace: Some("sp1".into()),
                annotations: (!annotations.is_empty()).then(|| {
                    annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect()
                }),
                owner_references: Some(vec![OwnerReference {
                    api_version: "apps.kruise.io/v1alpha1".into(),
                    kind: "CloneSet".into(),
                    name: "cs".into(),
                    uid: "uid".into(),
                    controller: Some(true),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn parsed(s: &str) -> Value {
        serde_json::from_str(s).expect("json")
    }

    // Upstream's `TestRemoveAndBackUpPodContainerLivenessProbe`, its expected strings compared
    // as JSON (our field order is k8s-openapi's).
    #[test]
    fn backs_up_every_container_probe() {
        let upstream_http = r#"{"httpGet":{"path":"/health","port":7001,"scheme":"HTTP"},"initialDelaySeconds":3000,"timeoutSeconds":5,"periodSeconds":100,"successThreshold":1,"failureThreshold":3}"#;
        let upstream_exec = r#"{"exec":{"command":["/home/admin/liveness.sh"]},"initialDelaySeconds":3000,"timeoutSeconds":5,"periodSeconds":100,"successThreshold":1,"failureThreshold":3}"#;
        let cases: Vec<(Vec<Container>, Option<String>)> = vec![
            (
                vec![container("c1", Some(http_probe()))],
                Some(format!(
                    r#"[{{"name":"c1","livenessProbe":{upstream_http}}}]"#
                )),
            ),
            (
                vec![
                    container("c1", Some(http_probe())),
                    container("c2", Some(exec_probe())),
                ],
                Some(format!(
                    r#"[{{"name":"c1","livenessProbe":{upstream_http}}},{{"name":"c2","livenessProbe":{upstream_exec}}}]"#
                )),
            ),
            (
                vec![container("c1", None), container("c2", Some(exec_probe()))],
                Some(format!(
                    r#"[{{"name":"c2","livenessProbe":{upstream_exec}}}]"#
                )),
            ),
            (vec![container("c1", None)], None),
        ];
        for (containers, want) in cases {
            let mut p = pod(&[], containers);
            let got = remove_and_back_up(&mut p).expect("encodes");
            assert_eq!(got.as_deref().map(parsed), want.as_deref().map(parsed));
            let spec = p.spec.as_ref().expect("spec");
            assert!(spec.containers.iter().all(|c| c.liveness_probe.is_none()));
            let stored = p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(keys::CONTAINER_PROBE_CONTEXT_ANNOTATION));
            assert_eq!(stored, got.as_ref());
        }
    }

    // Upstream's `TestUsingEnhancedLivenessProbe`.
    #[test]
    fn only_true_asks_for_it() {
        let key = keys::USING_ENHANCED_LIVENESS_ANNOTATION;
        assert!(!using_enhanced_liveness(&pod(&[], vec![])));
        assert!(using_enhanced_liveness(&pod(&[(key, "true")], vec![])));
        assert!(!using_enhanced_liveness(&pod(&[(key, "false")], vec![])));
    }

    // Upstream's `TestRemoveAndBackUpPodContainerLivenessProbeLink`, plus a Pod no Kruise
    // workload controls.
    #[test]
    fn mutates_only_annotated_kruise_pods() {
        let key = keys::USING_ENHANCED_LIVENESS_ANNOTATION;
        let mut p = pod(&[(key, "true")], vec![container("c1", Some(http_probe()))]);
        assert!(mutate(&mut p).expect("ok"));
        let annotations = p.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.get(key).map(String::as_str), Some("true"));
        assert_eq!(
            parsed(&annotations[keys::CONTAINER_PROBE_CONTEXT_ANNOTATION]),
            json!([{"name": "c1", "livenessProbe": serde_json::to_value(http_probe()).expect("probe")}])
        );
        assert_eq!(
            p.spec.as_ref().expect("spec").containers[0].liveness_probe,
            None
        );

        let untouched = pod(&[], vec![container("c1", Some(http_probe()))]);
        let mut p = untouched.clone();
        assert!(!mutate(&mut p).expect("ok"));
        assert_eq!(p, untouched);

        let mut not_kruise = pod(&[(key, "true")], vec![container("c1", Some(http_probe()))]);
        not_kruise.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        let before = not_kruise.clone();
        assert!(!mutate(&mut not_kruise).expect("ok"));
        assert_eq!(not_kruise, before);
    }
}
