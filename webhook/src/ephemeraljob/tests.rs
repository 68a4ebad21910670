use serde_json::{Value, json};

use super::defaults::default_ephemeraljob;
use super::validation::ephemeraljob_errors;
use crate::field::aggregate;

fn job(spec: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "EphemeralJob",
        "metadata": {"name": "j", "namespace": "ns"}, "spec": spec})
}

fn spec_with(extra: Value) -> Value {
    let mut s = json!({"selector": {"matchLabels": {"app": "a"}},
        "template": {"ephemeralContainers": [{"name": "dbg", "image": "busybox:1",
            "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File"}]}});
    for (k, v) in extra.as_object().into_iter().flatten() {
        s[k] = v.clone();
    }
    s
}

fn container(extra: Value) -> Value {
    let mut c = json!({"name": "dbg", "image": "busybox:1", "imagePullPolicy": "IfNotPresent",
        "terminationMessagePolicy": "File"});
    for (k, v) in extra.as_object().into_iter().flatten() {
        c[k] = v.clone();
    }
    json!({"template": {"ephemeralContainers": [c]}})
}

#[test]
fn defaults_are_the_api_servers_container_defaults() {
    let mut j = job(json!({"template": {"ephemeralContainers": [
        {"name": "a", "image": "busybox"},
        {"name": "b", "image": "busybox:1", "imagePullPolicy": "Never", "terminationMessagePolicy": "FallbackToLogsOnError"},
        3
    ]}}));
    default_ephemeraljob(&mut j);
    let cs = &j["spec"]["template"]["ephemeralContainers"];
    assert_eq!(cs[0]["imagePullPolicy"], "Always");
    assert_eq!(cs[0]["terminationMessagePolicy"], "File");
    assert_eq!(cs[0]["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(cs[1]["imagePullPolicy"], "Never");
    assert_eq!(cs[1]["terminationMessagePolicy"], "FallbackToLogsOnError");
    assert_eq!(cs[2], 3, "left for the validation to name");
    assert!(
        j["spec"].get("parallelism").is_none(),
        "the spec is the user's"
    );
}

#[test]
fn a_valid_job_passes() {
    let ok = job(spec_with(
        json!({"replicas": 2, "parallelism": 0, "paused": true,
        "activeDeadlineSeconds": 20, "ttlSecondsAfterFinished": 0}),
    ));
    assert_eq!(aggregate(&ephemeraljob_errors(&ok)), "");
    let all_allowed = container(
        json!({"command": ["sh"], "args": ["-c", "true"], "workingDir": "/",
        "env": [{"name": "A", "value": "1"}], "targetContainerName": "main", "stdin": true,
        "tty": true, "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}},
        "volumeMounts": [{"name": "v", "mountPath": "/v"}], "ports": []}),
    );
    assert_eq!(
        aggregate(&ephemeraljob_errors(&job(spec_with(all_allowed)))),
        ""
    );
}

#[test]
fn bad_input_is_refused_naming_the_field() {
    let c0 = "spec.template.ephemeralContainers[0]";
    let cases = [
        (
            json!({"parallelism": -1}),
            "spec.parallelism: Invalid value: -1: must be an integer greater than or equal to 0",
        ),
        (
            json!({"replicas": "2"}),
            "spec.replicas: Invalid value: \"2\": must be an integer greater than or equal to 0",
        ),
        (
            json!({"ttlSecondsAfterFinished": -5}),
            "spec.ttlSecondsAfterFinished: Invalid value: -5",
        ),
        (
            json!({"activeDeadlineSeconds": 0}),
            "spec.activeDeadlineSeconds: Invalid value: 0: must be an integer greater than 0",
        ),
        (
            json!({"paused": "yes"}),
            "spec.paused: Invalid value: \"yes\": must be true or false",
        ),
        (json!({"selector": null}), "spec.selector: Required value"),
        (
            json!({"selector": {}}),
            "spec.selector: Invalid value: {}: empty selector is invalid for EphemeralJob",
        ),
        (
            json!({"selector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}}),
            "spec.selector.matchExpressions[0].operator",
        ),
        (
            json!({"template": {"ephemeralContainers": []}}),
            "spec.template.ephemeralContainers: Required value: give at least one ephemeral container",
        ),
        (
            json!({"template": {}}),
            "spec.template.ephemeralContainers: Required value",
        ),
        (
            container(json!({"name": "Bad_Name"})),
            "[0].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label",
        ),
        (
            container(json!({"image": " busybox"})),
            "[0].image: Invalid value: \" busybox\": must not have leading or trailing whitespace",
        ),
        (
            container(json!({"imagePullPolicy": "Sometimes"})),
            "[0].imagePullPolicy: Unsupported value: \"Sometimes\"",
        ),
        (
            container(json!({"terminationMessagePolicy": null})),
            "[0].terminationMessagePolicy: Required value",
        ),
        (
            container(json!({"lifecycle": {"preStop": {"exec": {"command": ["ls"]}}}})),
            "[0].lifecycle: Forbidden: cannot be set for an Ephemeral Container",
        ),
        (
            container(json!({"ports": [{"containerPort": 80}]})),
            "[0].ports: Forbidden",
        ),
        (
            container(json!({"resources": {"limits": {"cpu": "1"}}})),
            "[0].resources: Forbidden",
        ),
        (
            container(json!({"readinessProbe": {"exec": {"command": ["true"]}}})),
            "[0].readinessProbe: Forbidden",
        ),
        (
            container(json!({"volumeMounts": [{"name": "v", "mountPath": "/v", "subPath": "x"}]})),
            "[0].volumeMounts[0].subPath: Forbidden",
        ),
    ];
    for (extra, want) in cases {
        let got = aggregate(&ephemeraljob_errors(&job(spec_with(extra.clone()))));
        let want = match want.strip_prefix("[0].") {
            Some(rest) => format!("{c0}.{rest}"),
            None => want.to_owned(),
        };
        assert!(got.contains(&want), "{extra}: got {got:?}, want {want:?}");
    }
    let dup = json!({"template": {"ephemeralContainers": [
        {"name": "d", "image": "i", "imagePullPolicy": "Always", "terminationMessagePolicy": "File"},
        {"name": "d", "image": "i", "imagePullPolicy": "Always", "terminationMessagePolicy": "File"}]}});
    let got = aggregate(&ephemeraljob_errors(&job(spec_with(dup))));
    assert!(
        got.contains(
            "spec.template.ephemeralContainers[1].name: Invalid value: \"d\": Duplicate value"
        ),
        "{got}"
    );
    let got = aggregate(&ephemeraljob_errors(&job(json!(null))));
    assert!(got.contains("spec: Required value"), "{got}");
}
