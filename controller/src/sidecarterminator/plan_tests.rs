//! Table and property tests of the SidecarTerminator's pure decisions, after upstream's
//! `utils_test.go`, `sidecar_terminator_controller_test.go` and the pod event handler's test.

use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

const SIDE: &str = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT";
const IGNORE: &str = "KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE";
const WITH_IMAGE: &str = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE";

/// A container's state: running, or terminated with this exit code; `None`: no status yet.
type St = Option<Option<i32>>;

fn container(name: &str, env: &[(&str, &str)]) -> Value {
    let env: Vec<Value> = env
        .iter()
        .map(|(k, v)| json!({"name": k, "value": v}))
        .collect();
    json!({"name": name, "image": format!("{name}:v1"), "env": env})
}

fn status(name: &str, st: Option<i32>) -> Value {
    let state = match st {
        None => json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}}),
        Some(code) => json!({"terminated": {"exitCode": code}}),
    };
    json!({"name": name, "ready": st.is_none(), "restartCount": 0, "image": "x",
           "imageID": "x", "containerID": format!("containerd://{name}"), "state": state})
}

/// Environment variables (name, value).
type Env<'a> = &'a [(&'a str, &'a str)];

/// A Pod with `restart` policy and `phase`; each container with its env and state.
fn pod(restart: &str, phase: &str, cs: &[(&str, Env<'_>, St)]) -> Pod {
    let containers: Vec<Value> = cs.iter().map(|(n, e, _)| container(n, e)).collect();
    let statuses: Vec<Value> = cs
        .iter()
        .filter_map(|(n, _, st)| st.map(|s| status(n, s)))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
        "spec": {"restartPolicy": restart, "nodeName": "n", "containers": containers},
        "status": {"phase": phase, "containerStatuses": statuses}
    }))
    .expect("pod")
}

fn names(v: &[&str]) -> Names {
    v.iter().map(|s| (*s).to_owned()).collect()
}

const SC: &[(&str, &str)] = &[(SIDE, "true")];
const SC_IGNORE: &[(&str, &str)] = &[(SIDE, "true"), (IGNORE, "true")];
const NONE: &[(&str, &str)] = &[];
const RUN: St = Some(None);
const fn exit(code: i32) -> St {
    Some(Some(code))
}

#[test]
fn which_containers_are_sidecars() {
    let c = |env: &[(&str, &str)]| -> Container {
        serde_json::from_value(container("c", env)).expect("container")
    };
    assert!(is_normal_sidecar(&c(&[(SIDE, "true")])));
    assert!(
        is_normal_sidecar(&c(&[(SIDE, "TRUE")])),
        "any case, as EqualFold"
    );
    assert!(!is_normal_sidecar(&c(&[(SIDE, "false")])));
    assert!(!is_normal_sidecar(&c(&[(SIDE, "yes")])));
    assert!(!is_normal_sidecar(&c(NONE)));
    assert!(is_ignore_exit_code_sidecar(&c(SC_IGNORE)));
    assert!(
        !is_ignore_exit_code_sidecar(&c(&[(IGNORE, "true")])),
        "ignoring the exit code alone does not make a sidecar"
    );
    assert!(!is_ignore_exit_code_sidecar(&c(&[
        (SIDE, "true"),
        (IGNORE, "no")
    ])));
    assert_eq!(
        replacement_image(&c(&[(WITH_IMAGE, "exit:v1")])),
        Some("exit:v1")
    );
    assert_eq!(replacement_image(&c(&[(WITH_IMAGE, "")])), None);
    assert!(is_sidecar(&c(&[(WITH_IMAGE, "exit:v1")])));
    assert!(!is_sidecar(&c(&[(WITH_IMAGE, "")])));
}

#[test]
fn interesting_pods() {
    type Case<'a> = (&'a str, Pod, bool);
    let cases: Vec<Case<'_>> = vec![
        (
            "Never, main exited 0, sidecar running",
            pod(
                "Never",
                "Running",
                &[("main", NONE, exit(0)), ("s", SC, RUN)],
            ),
            true,
        ),
        (
            "Never, main failed, sidecar running: also done",
            pod(
                "Never",
                "Running",
                &[("main", NONE, exit(1)), ("s", SC, RUN)],
            ),
            true,
        ),
        (
            "Never, main running",
            pod("Never", "Running", &[("main", NONE, RUN), ("s", SC, RUN)]),
            false,
        ),
        (
            "OnFailure, main succeeded",
            pod(
                "OnFailure",
                "Running",
                &[("main", NONE, exit(0)), ("s", SC, RUN)],
            ),
            true,
        ),
        (
            "OnFailure, main failed: the kubelet restarts it",
            pod(
                "OnFailure",
                "Running",
                &[("main", NONE, exit(1)), ("s", SC, RUN)],
            ),
            false,
        ),
        (
            "Always",
            pod(
                "Always",
                "Running",
                &[("main", NONE, exit(0)), ("s", SC, RUN)],
            ),
            false,
        ),
        (
            "Pending",
            pod(
                "Never",
                "Pending",
                &[("main", NONE, exit(0)), ("s", SC, RUN)],
            ),
            false,
        ),
        (
            "no sidecar",
            pod(
                "Never",
                "Running",
                &[("main", NONE, exit(0)), ("s", NONE, RUN)],
            ),
            false,
        ),
        (
            "sidecar already terminated",
            pod(
                "Never",
                "Running",
                &[("main", NONE, exit(0)), ("s", SC, exit(0))],
            ),
            false,
        ),
        (
            "a status missing: nothing counts as completed",
            pod(
                "Never",
                "Running",
                &[("main", NONE, exit(0)), ("s", SC, None)],
            ),
            false,
        ),
        (
            "two mains, one running",
            pod(
                "Never",
                "Running",
                &[("a", NONE, exit(0)), ("b", NONE, RUN), ("s", SC, RUN)],
            ),
            false,
        ),
    ];
    for (what, p, want) in cases {
        assert_eq!(is_interesting(&p), want, "{what}");
    }
    let mut deleting = pod(
        "Never",
        "Running",
        &[("main", NONE, exit(0)), ("s", SC, RUN)],
    );
    deleting.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
    );
    assert!(!is_interesting(&deleting));
    let mut no_policy = pod(
        "Never",
        "Running",
        &[("main", NONE, exit(0)), ("s", SC, RUN)],
    );
    no_policy.spec.as_mut().expect("spec").restart_policy = None;
    assert!(!is_interesting(&no_policy), "no policy is Always");
}

#[test]
fn plans() {
    type Case<'a> = (&'a str, Pod, bool, Vec<Action>);
    let cases: Vec<Case<'_>> = vec![
        (
            "normal sidecar: killed by a request",
            pod(
                "Never",
                "Running",
                &[("main", NONE, exit(0)), ("s", SC, RUN)],
            ),
            false,
            vec![Action::Kill(names(&["s"]))],
        ),
        (
            "only the running sidecars are in the request",
            pod(
                "Never",
                "Running",
                &[("main", NONE, exit(0)), ("a", SC, exit(0)), ("b", SC, RUN)],
            ),
            false,
            vec![Action::Kill(names(&["b"]))],
        ),
        (
            "ignore exit code, main succeeded: Succeeded, then killed",
            pod(
                "Never",
                "Running",
                &[("main", NONE, exit(0)), ("s", SC_IGNORE, RUN)],
            ),
            false,
            vec![
                Action::MarkTerminated { phase: "Succeeded" },
                Action::Kill(names(&["s"])),
            ],
        ),
        (
            "ignore exit code, main failed: Failed, then killed",
            pod(
                "Never",
                "Running",
                &[("main", NONE, exit(3)), ("s", SC_IGNORE, RUN)],
            ),
            false,
            vec![
                Action::MarkTerminated { phase: "Failed" },
                Action::Kill(names(&["s"])),
            ],
        ),
        (
            "ignore exit code, phase already set: only the kill",
            pod(
                "Never",
                "Succeeded",
                &[("main", NONE, exit(0)), ("s", SC_IGNORE, RUN)],
            ),
            false,
            vec![Action::Kill(names(&["s"]))],
        ),
        (
            "both kinds: the normal ones first, the phase waits for them",
            pod(
                "Never",
                "Running",
                &[
                    ("main", NONE, exit(0)),
                    ("a", SC, RUN),
                    ("b", SC_IGNORE, RUN),
                ],
            ),
            false,
            vec![Action::Kill(names(&["a"]))],
        ),
        (
            "both kinds, the normal one done",
            pod(
                "Never",
                "Running",
                &[
                    ("main", NONE, exit(0)),
                    ("a", SC, exit(137)),
                    ("b", SC_IGNORE, RUN),
                ],
            ),
            false,
            vec![
                Action::MarkTerminated { phase: "Succeeded" },
                Action::Kill(names(&["b"])),
            ],
        ),
        (
            "_WITH_IMAGE on a normal node: a sidecar, but nothing stops it (as upstream)",
            pod(
                "Never",
                "Running",
                &[
                    ("main", NONE, exit(0)),
                    ("s", &[(WITH_IMAGE, "exit:v1")], RUN),
                ],
            ),
            false,
            vec![],
        ),
        (
            "_WITH_IMAGE on a virtual-kubelet node: image replaced",
            pod(
                "Never",
                "Running",
                &[
                    ("main", NONE, exit(0)),
                    ("s", &[(WITH_IMAGE, "exit:v1")], RUN),
                ],
            ),
            true,
            vec![Action::ReplaceImages(vec![(
                "s".to_owned(),
                "exit:v1".to_owned(),
            )])],
        ),
        (
            "virtual-kubelet node: no request for a normal sidecar (as upstream)",
            pod(
                "Never",
                "Running",
                &[("main", NONE, exit(0)), ("s", SC, RUN)],
            ),
            true,
            vec![],
        ),
        (
            "main still running",
            pod("Never", "Running", &[("main", NONE, RUN), ("s", SC, RUN)]),
            false,
            vec![],
        ),
    ];
    for (what, p, vk, want) in cases {
        assert_eq!(plan(&p, vk), want, "{what}");
    }
}

#[test]
fn the_image_already_replaced_is_not_replaced_again() {
    let mut p = pod(
        "Never",
        "Running",
        &[
            ("main", NONE, exit(0)),
            ("s", &[(WITH_IMAGE, "exit:v1")], RUN),
        ],
    );
    p.spec.as_mut().expect("spec").containers[1].image = Some("exit:v1".into());
    assert_eq!(plan(&p, true), vec![]);
}

#[test]
fn the_request_as_upstream_creates_it() {
    let p = pod(
        "Never",
        "Running",
        &[("main", NONE, exit(0)), ("s", SC, RUN)],
    );
    let crr = request(&p, &names(&["s", "t"]));
    let v = serde_json::to_value(&crr).expect("json");
    assert_eq!(v["apiVersion"], "apps.kruise.io/v1beta1");
    assert_eq!(v["metadata"]["name"], "sidecar-termination-u-1");
    assert_eq!(v["metadata"]["namespace"], "ns");
    assert_eq!(
        v["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u-1",
                "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(
        v["spec"],
        json!({"podName": "p", "containers": [{"name": "s"}, {"name": "t"}],
               "strategy": {"failurePolicy": "Ignore", "forceRecreate": true}})
    );
}

#[test]
fn the_status_patch() {
    let v = terminated_patch("Failed", jiff::Timestamp::UNIX_EPOCH);
    assert_eq!(
        v,
        json!({"status": {"phase": "Failed", "conditions": [{
            "type": "SidecarTerminated", "status": "True",
            "lastTransitionTime": "1970-01-01T00:00:00Z",
            "message": "Terminated by Sidecar Terminator"}]}})
    );
}

fn arb_state() -> impl Strategy<Value = St> {
    prop_oneof![
        Just(None),
        Just(Some(None)),
        (0i32..3).prop_map(|c| Some(Some(c)))
    ]
}

fn arb_env() -> impl Strategy<Value = &'static [(&'static str, &'static str)]> {
    prop_oneof![Just(NONE), Just(SC), Just(SC_IGNORE)]
}

proptest! {
    /// Whatever the Pod: nothing is planned for a Pod that is not interesting; a kill names
    /// only running sidecars, never a main container; the phase written is Succeeded exactly
    /// when every main container exited 0; and a Pod's own plan never repeats an action.
    #[test]
    fn plans_touch_only_running_sidecars(
        restart in prop_oneof![Just("Never"), Just("OnFailure"), Just("Always")],
        cs in proptest::collection::vec((arb_env(), arb_state()), 1..5),
    ) {
        let named: Vec<(String, Env<'_>, St)> = cs
            .iter()
            .enumerate()
            .map(|(i, (e, s))| (format!("c{i}"), *e, *s))
            .collect();
        let refs: Vec<(&str, Env<'_>, St)> =
            named.iter().map(|(n, e, s)| (n.as_str(), *e, *s)).collect();
        let p = pod(restart, "Running", &refs);
        let actions = plan(&p, false);
        if !is_interesting(&p) {
            prop_assert!(actions.is_empty());
        }
        let (main, _) = group(&p);
        for a in &actions {
            match a {
                Action::Kill(ns) => {
                    prop_assert!(!ns.is_empty());
                    for n in ns {
                        prop_assert!(!main.contains(n));
                        let st = refs.iter().find(|(c, _, _)| *c == n.as_str()).map(|(_, _, s)| *s);
                        prop_assert_eq!(st, Some(RUN));
                    }
                }
                Action::MarkTerminated { phase } => {
                    let all_zero = refs
                        .iter()
                        .filter(|(n, _, _)| main.contains(*n))
                        .all(|(_, _, s)| *s == exit(0));
                    prop_assert_eq!(*phase == "Succeeded", all_zero);
                }
                Action::ReplaceImages(_) => prop_assert!(false, "no image replacement off virtual-kubelet"),
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for a in &actions {
            let key = format!("{a:?}");
            prop_assert!(seen.insert(key));
        }
    }
}
