use serde_json::{Value, json};

use super::defaults::default_imagepulljob;
use super::validation::{imagepulljob_errors, validate};
use crate::field::{FieldError, aggregate};

fn job(spec: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "ImagePullJob",
        "metadata": {"name": "j", "namespace": "ns"}, "spec": spec})
}

fn messages(errs: &[FieldError]) -> String {
    aggregate(errs)
}

#[test]
fn imagepulljob_defaults() {
    let mut j = job(json!({"image": "nginx:1"}));
    assert!(default_imagepulljob(&mut j));
    assert_eq!(j["spec"]["completionPolicy"]["type"], "Always");
    assert_eq!(j["spec"]["pullPolicy"]["timeoutSeconds"], 600);
    assert_eq!(j["spec"]["pullPolicy"]["backoffLimit"], 3);
    assert_eq!(j["spec"]["imagePullPolicy"], "IfNotPresent");
    // What the user set stays.
    let mut j = job(
        json!({"image": "nginx:1", "completionPolicy": {"type": "Never"},
        "pullPolicy": {"timeoutSeconds": 5}, "imagePullPolicy": "Always"}),
    );
    assert!(default_imagepulljob(&mut j));
    assert_eq!(j["spec"]["completionPolicy"]["type"], "Never");
    assert_eq!(j["spec"]["pullPolicy"]["timeoutSeconds"], 5);
    assert_eq!(j["spec"]["imagePullPolicy"], "Always");
    assert!(!default_imagepulljob(&mut job(
        json!({"completionPolicy": 3})
    )));
}

#[test]
fn imagepulljob_rules() {
    let ok = job(json!({"image": "127.0.0.1:5000/kruise-rs/testapp:v1",
        "selector": {"names": ["n1"]}, "completionPolicy": {"type": "Always",
        "ttlSecondsAfterFinished": 10}}));
    assert!(imagepulljob_errors(&ok).is_empty());
    let cases = [
        (
            json!({"image": ""}),
            "spec.image: Required value: image can not be empty",
        ),
        (
            json!({"image": "Nginx:1"}),
            "repository name must be lowercase",
        ),
        (json!({"image": "nginx:"}), "bad tag"),
        (json!({"image": "nginx@sha256:12"}), "bad digest"),
        (
            json!({"image": "a", "selector": {"names": ["n"], "matchLabels": {"a": "b"}}}),
            "spec.selector: Forbidden: can not set both names and labelSelector",
        ),
        (
            json!({"image": "a", "completionPolicy": {"type": "Never", "activeDeadlineSeconds": 3}}),
            "can only work with Always CompletionPolicyType",
        ),
        (
            json!({"image": "a", "completionPolicy": {"type": "Sometimes"}}),
            "spec.completionPolicy.type: Unsupported value: \"Sometimes\"",
        ),
        (
            json!({"image": "a", "pullPolicy": {"backoffLimit": -1}}),
            "spec.pullPolicy.backoffLimit: Invalid value: -1",
        ),
        (
            json!({"image": "a", "completionPolicy": {"activeDeadlineSeconds": 300}}),
            "spec.completionPolicy.activeDeadlineSeconds: Invalid value: 300: must be greater than or equal to spec.pullPolicy.timeoutSeconds (600, default 600)",
        ),
        (
            json!({"image": "a", "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 30},
                "pullPolicy": {"timeoutSeconds": 60}}),
            "spec.completionPolicy.activeDeadlineSeconds: Invalid value: 30: must be greater than or equal to spec.pullPolicy.timeoutSeconds (60, default 600)",
        ),
    ];
    for (spec, want) in cases {
        let got = messages(&imagepulljob_errors(&job(spec.clone())));
        assert!(got.contains(want), "{spec}: {got}");
    }
}

#[test]
fn valid_parallelism_and_deadlines_pass() {
    for spec in [
        json!({"image": "a", "parallelism": 0}),
        json!({"image": "a", "parallelism": "3"}),
        json!({"image": "a", "completionPolicy": {"activeDeadlineSeconds": 600}}),
        json!({"image": "a", "completionPolicy": {"activeDeadlineSeconds": 60},
            "pullPolicy": {"timeoutSeconds": 60}}),
        json!({"image": "a", "pullSecrets": ["reg-cred", "other.cred"]}),
    ] {
        assert!(
            imagepulljob_errors(&job(spec.clone())).is_empty(),
            "{spec}: {}",
            messages(&imagepulljob_errors(&job(spec.clone())))
        );
    }
}

#[test]
fn pull_secrets_are_immutable() {
    let body = |old: Value, new: Value| {
        crate::review::tests::review_body(
            "UPDATE",
            ("apps.kruise.io", "v1beta1", "ImagePullJob"),
            "imagepulljobs",
            Some(job(new)),
            Some(job(old)),
        )
    };
    let run = |old: Value, new: Value| {
        crate::review::tests::response(&crate::review::admit(&body(old, new), validate))
    };
    let r = run(
        json!({"image": "a", "pullSecrets": ["s1"]}),
        json!({"image": "a", "pullSecrets": ["s2"]}),
    );
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(
        r["status"]["message"],
        "spec.pullSecrets: Forbidden: field is immutable"
    );
    let r = run(
        json!({"image": "a"}),
        json!({"image": "a", "pullSecrets": ["s1"]}),
    );
    assert_eq!(r["allowed"], false, "{r}");
    // Other fields may change; absent and empty are the same list.
    let r = run(
        json!({"image": "a", "pullSecrets": []}),
        json!({"image": "a", "parallelism": 3}),
    );
    assert_eq!(r["allowed"], true, "{r}");
}
