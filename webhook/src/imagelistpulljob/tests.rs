use serde_json::{Value, json};

use super::validation::{MAX_IMAGES_PER_LIST, imagelistpulljob_errors};
use crate::field::{FieldError, aggregate};
use crate::pull_template::default_template;

fn job(spec: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "ImagePullJob",
        "metadata": {"name": "j", "namespace": "ns"}, "spec": spec})
}

fn messages(errs: &[FieldError]) -> String {
    aggregate(errs)
}

#[test]
fn imagelistpulljob_defaults_without_pull_policy_of_images() {
    let mut j = job(json!({"images": ["nginx:1"]}));
    assert!(default_template(&mut j));
    assert_eq!(j["spec"]["completionPolicy"]["type"], "Always");
    assert_eq!(j["spec"]["pullPolicy"]["timeoutSeconds"], 600);
    assert_eq!(j["spec"]["pullPolicy"]["backoffLimit"], 3);
    // Upstream leaves imagePullPolicy to each ImagePullJob's own defaulting.
    assert!(j["spec"].get("imagePullPolicy").is_none());
    assert!(imagelistpulljob_errors(&j).is_empty());
}

#[test]
fn imagelistpulljob_rules() {
    let cases = [
        (
            json!({}),
            "spec.images: Required value: images can not be empty",
        ),
        (
            json!({"images": []}),
            "spec.images: Required value: images can not be empty",
        ),
        (
            json!({"images": ["nginx:1", "redis", "nginx:1"]}),
            "spec.images[2]: Invalid value: \"nginx:1\": images cannot have duplicate values (same as spec.images[0])",
        ),
        (
            json!({"images": ["nginx:1", "Bad/Image"]}),
            "spec.images[1]: Invalid value: \"Bad/Image\": invalid reference format: repository name must be lowercase",
        ),
        (
            json!({"images": ["nginx:1", ""]}),
            "spec.images[1]: Required value: image can not be empty",
        ),
        (
            json!({"images": "nginx"}),
            "spec.images: Invalid value: \"nginx\": must be a list of images",
        ),
        (
            json!({"images": ["a"], "completionPolicy": {"type": "Never", "ttlSecondsAfterFinished": 1}}),
            "can only work with Always CompletionPolicyType",
        ),
    ];
    for (spec, want) in cases {
        let got = messages(&imagelistpulljob_errors(&job(spec.clone())));
        assert!(got.contains(want), "{spec}: {got}");
    }
    let many: Vec<String> = (0..=MAX_IMAGES_PER_LIST)
        .map(|i| format!("img{i}"))
        .collect();
    let got = messages(&imagelistpulljob_errors(&job(json!({"images": many}))));
    assert!(got.contains("can not be more than 255"), "{got}");
    // Every problem is reported, not only the first.
    let got = messages(&imagelistpulljob_errors(&job(
        json!({"images": ["A", "A"], "pullPolicy": {"timeoutSeconds": -1}}),
    )));
    assert!(
        got.starts_with('[')
            && got.contains("spec.images[0]")
            && got.contains("spec.images[1]")
            && got.contains("spec.pullPolicy.timeoutSeconds"),
        "{got}"
    );
}
