use serde_json::{Value, json};

use super::defaults::{UNLIMITED_PARALLELISM, default_broadcastjob};
use super::validation::broadcastjob_errors;
use crate::field::aggregate;

fn job(spec: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "BroadcastJob",
        "metadata": {"name": "j", "namespace": "ns"}, "spec": spec})
}

fn pod(restart: &str) -> Value {
    json!({"spec": {"containers": [{"name": "c", "image": "busybox:1"}], "restartPolicy": restart}})
}

#[test]
fn broadcastjob_defaults() {
    let mut j =
        job(json!({"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}));
    assert!(default_broadcastjob(&mut j, true));
    assert_eq!(j["spec"]["completionPolicy"]["type"], "Always");
    assert_eq!(j["spec"]["failurePolicy"]["type"], "FailFast");
    assert_eq!(j["spec"]["parallelism"], UNLIMITED_PARALLELISM);
    // Upstream's Pod defaults: restartPolicy Always, which validation then refuses.
    assert_eq!(j["spec"]["template"]["spec"]["restartPolicy"], "Always");
    assert_eq!(
        j["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );
    // What the user set stays; no template defaults when the template did not change.
    let mut j = job(
        json!({"parallelism": "50%", "completionPolicy": {"type": "Never"},
        "failurePolicy": {"type": "Pause", "restartLimit": 2}, "template": pod("Never")}),
    );
    assert!(default_broadcastjob(&mut j, false));
    assert_eq!(j["spec"]["parallelism"], "50%");
    assert_eq!(j["spec"]["completionPolicy"]["type"], "Never");
    assert_eq!(j["spec"]["failurePolicy"]["type"], "Pause");
    assert_eq!(j["spec"]["failurePolicy"]["restartLimit"], 2);
    assert!(j["spec"]["template"]["spec"].get("dnsPolicy").is_none());
    assert!(!default_broadcastjob(
        &mut job(json!({"failurePolicy": 3})),
        true
    ));
    assert!(!default_broadcastjob(
        &mut job(json!({"template": {"spec": 3}})),
        true
    ));
}

#[test]
fn broadcastjob_rules() {
    let ok = job(json!({"parallelism": 2, "template": pod("OnFailure"),
        "completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 10, "activeDeadlineSeconds": 60},
        "failurePolicy": {"type": "Continue", "restartLimit": 3}}));
    assert_eq!(aggregate(&broadcastjob_errors(&ok)), "");
    let cases = [
        (
            json!({"template": pod("Always")}),
            "spec.template.spec.restartPolicy: Invalid value: \"Always\": pod restartPolicy can only be Never or OnFailure",
        ),
        (
            json!({"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}),
            "spec.template.spec.restartPolicy: Invalid value: null",
        ),
        (
            json!({"template": pod("Never"), "completionPolicy": {"type": "Never", "ttlSecondsAfterFinished": 5}}),
            "spec.completionPolicy.ttlSecondsAfterFinished: Invalid value: 5: ttlSecondsAfterFinished can just work with Always CompletionPolicyType",
        ),
        (
            json!({"template": pod("Never"), "completionPolicy": {"type": "Never", "activeDeadlineSeconds": 5}}),
            "spec.completionPolicy.activeDeadlineSeconds: Invalid value: 5: activeDeadlineSeconds can just work with Always",
        ),
        (
            json!({"template": pod("Never"), "completionPolicy": {"type": "Sometimes"}}),
            "spec.completionPolicy.type: Unsupported value: \"Sometimes\": supported values: \"Always\", \"Never\"",
        ),
        (
            json!({"template": pod("Never"), "completionPolicy": {"activeDeadlineSeconds": -1}}),
            "spec.completionPolicy.activeDeadlineSeconds: Invalid value: -1: must be an integer greater than or equal to 0",
        ),
        (
            json!({"template": pod("Never"), "parallelism": -1}),
            "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            json!({"template": pod("Never"), "parallelism": "150%"}),
            "spec.parallelism: Invalid value: \"150%\"",
        ),
        (
            json!({"template": pod("Never"), "parallelism": "lots"}),
            "spec.parallelism: Invalid value: \"lots\": must be an integer or a percentage",
        ),
        (
            json!({"template": pod("Never"), "failurePolicy": {"type": "Retry"}}),
            "spec.failurePolicy.type: Unsupported value: \"Retry\": supported values: \"Continue\", \"FailFast\", \"Pause\"",
        ),
        (
            json!({"template": pod("Never"), "failurePolicy": {"restartLimit": -2}}),
            "spec.failurePolicy.restartLimit: Invalid value: -2",
        ),
        (
            json!({"template": {"metadata": {"labels": {"broadcastjob-name": "x"}},
                "spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}}),
            "spec.template.metadata.labels: Invalid value: {\"broadcastjob-name\":\"x\"}: \"broadcastjob-name\" and \"broadcastjob-controller-uid\" are not allowed to preset in pod labels",
        ),
        (
            json!({"template": {"spec": {"containers": [], "restartPolicy": "Never"}}}),
            "spec.template.spec.containers: Required value",
        ),
        (
            json!({"template": {"spec": {"containers": [{"name": "c"}], "restartPolicy": "Never"}}}),
            "spec.template.spec.containers[0].image: Required value",
        ),
        (json!({}), "spec.template: Required value"),
    ];
    for (spec, want) in cases {
        let got = aggregate(&broadcastjob_errors(&job(spec.clone())));
        assert!(got.contains(want), "{spec}: {got}");
    }
    let mut bad_name = job(json!({"template": pod("Never")}));
    bad_name["metadata"]["name"] = json!("a.b");
    let got = aggregate(&broadcastjob_errors(&bad_name));
    assert!(
        got.starts_with("metadata.name: Invalid value: \"a.b\": BroadcastJob name must consist of alphanumeric characters or '-'"),
        "{got}"
    );
    bad_name["metadata"]["name"] = json!("a".repeat(64));
    let got = aggregate(&broadcastjob_errors(&bad_name));
    assert!(got.contains("must be no more than 63 characters"), "{got}");
}
