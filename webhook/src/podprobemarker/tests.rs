use serde_json::{Value, json};

use super::defaults::default_podprobemarker;
use super::validation::podprobemarker_errors;
use crate::field::aggregate;

fn ppm(probe: Value) -> Value {
    json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "probes": [probe]}})
}

fn good() -> Value {
    json!({"name": "healthy", "containerName": "main",
        "probe": {"exec": {"command": ["true"]}},
        "markerPolicy": [{"state": "Succeeded", "labels": {"healthy": "true"}}],
        "podConditionType": "game.kruise.io/healthy"})
}

fn errors(v: &Value) -> String {
    let mut v = v.clone();
    default_podprobemarker(&mut v);
    aggregate(&podprobemarker_errors(&v))
}

#[test]
fn a_good_marker_is_admitted_and_defaulted() {
    let mut v = ppm(good());
    assert_eq!(errors(&v), "");
    default_podprobemarker(&mut v);
    let p = &v["spec"]["probes"][0]["probe"];
    assert_eq!(
        (p["timeoutSeconds"].as_i64(), p["periodSeconds"].as_i64()),
        (Some(1), Some(10))
    );
    assert_eq!(
        (
            p["successThreshold"].as_i64(),
            p["failureThreshold"].as_i64()
        ),
        (Some(1), Some(3))
    );
    let mut h = ppm(
        json!({"name": "h", "containerName": "c", "probe": {"httpGet": {"port": 80}},
        "podConditionType": "x.io/h"}),
    );
    default_podprobemarker(&mut h);
    assert_eq!(h["spec"]["probes"][0]["probe"]["httpGet"]["path"], "/");
    assert_eq!(h["spec"]["probes"][0]["probe"]["httpGet"]["scheme"], "HTTP");
}

#[test]
fn an_https_probe_is_admitted_as_upstream() {
    let v = ppm(
        json!({"name": "tls", "containerName": "c", "podConditionType": "x.io/tls",
        "probe": {"httpGet": {"port": 8443, "scheme": "HTTPS", "path": "/healthz"}}}),
    );
    assert_eq!(errors(&v), "");
}

#[test]
fn each_refusal_names_the_field() {
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"name": "a#b"}),
            "spec.probes[0].name: Invalid value: \"a#b\": probe name can't contains '#'",
        ),
        (
            json!({"name": "Ready"}),
            "spec.probes[0].name: Invalid value: \"Ready\": probe name can't be Ready",
        ),
        (
            json!({"containerName": ""}),
            "spec.probes[0].containerName: Required value",
        ),
        (
            json!({"probe": {}}),
            "spec.probes[0].probe: Required value: must specify a handler type",
        ),
        (
            json!({"probe": {"exec": {"command": ["true"]}, "tcpSocket": {"port": 1}}}),
            "spec.probes[0].probe.tcpSocket: Forbidden: may not specify more than 1 handler type",
        ),
        (
            json!({"probe": {"tcpSocket": {"port": 0}}}),
            "spec.probes[0].probe.tcpSocket.port: Invalid value: 0",
        ),
        (
            json!({"probe": {"httpGet": {"port": 80, "scheme": "https"}}}),
            "spec.probes[0].probe.httpGet.scheme: Unsupported value: \"https\": supported values: \"HTTP\", \"HTTPS\"",
        ),
        (
            json!({"probe": {"exec": {"command": ["true"]}, "periodSeconds": -1}}),
            "spec.probes[0].probe.periodSeconds: Invalid value: -1",
        ),
        (
            json!({"markerPolicy": null, "podConditionType": null}),
            "spec.probes[0].podConditionType: Required value: podConditionType and markerPolicy cannot be empty at the same time",
        ),
        (
            json!({"markerPolicy": [{"state": "True", "labels": {"a": "b"}}]}),
            "spec.probes[0].markerPolicy[0].state: Unsupported value: \"True\"",
        ),
        (
            json!({"markerPolicy": [{"state": "Failed", "labels": {"a": "b"}}, {"state": "Failed", "labels": {"a": "c"}}]}),
            "spec.probes[0].markerPolicy[1].state: Invalid value: \"Failed\": marker policy state must be unique",
        ),
        (
            json!({"markerPolicy": [{"state": "Failed"}]}),
            "spec.probes[0].markerPolicy[0]: Required value: marker policy annotations or labels can't be both empty",
        ),
    ];
    for (patch, want) in cases {
        let mut p = good();
        for (k, v) in patch.as_object().expect("object") {
            p[k] = v.clone();
        }
        let got = errors(&ppm(p));
        assert!(got.contains(want), "want {want:?} in {got:?}");
    }
}

#[test]
fn duplicate_names_and_condition_types_are_refused() {
    let v =
        json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "probes": [good(), good()]}});
    let got = errors(&v);
    assert!(
        got.contains("spec.probes[1].name: Invalid value: \"healthy\": probe name must be unique"),
        "{got}"
    );
    let mut second = good();
    second["name"] = json!("other");
    let v =
        json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "probes": [good(), second]}});
    assert!(errors(&v).contains("spec.probes[1].podConditionType: Invalid value: \"game.kruise.io/healthy\": podConditionType game.kruise.io/healthy must be unique"));
    let v = json!({"spec": {"selector": {}, "probes": [good()]}});
    assert!(
        errors(&v).contains("spec.selector: Invalid value"),
        "{}",
        errors(&v)
    );
    let v = json!({"spec": {"selector": {"matchLabels": {"a": "b"}}}});
    assert!(errors(&v).contains("spec.probes: Required value"));
}
