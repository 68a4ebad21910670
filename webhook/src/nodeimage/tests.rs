use serde_json::{Value, json};

use super::defaults::default_nodeimage;
use super::validation::{MAX_IMAGES_PER_NODE, nodeimage_errors};
use crate::field::{FieldError, aggregate};

fn messages(errs: &[FieldError]) -> String {
    aggregate(errs)
}

fn nodeimage(images: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "NodeImage",
        "metadata": {"name": "node-1"}, "spec": {"images": images}})
}

#[test]
fn nodeimage_defaults_then_validates() {
    let mut ni = nodeimage(json!({"nginx": {"tags": [{"tag": "1", "pullPolicy":
        {"ttlSecondsAfterFinished": 60, "timeoutSeconds": 10}}]}}));
    default_nodeimage(&mut ni, "2026-01-01T00:00:00Z");
    let t = &ni["spec"]["images"]["nginx"]["tags"][0];
    assert_eq!(t["createdAt"], "2026-01-01T00:00:00Z");
    assert_eq!(t["pullPolicy"]["timeoutSeconds"], 10);
    assert_eq!(t["pullPolicy"]["backoffLimit"], 3);
    assert!(
        nodeimage_errors(&ni).is_empty(),
        "{:?}",
        nodeimage_errors(&ni)
    );
}

#[test]
fn nodeimage_rules() {
    let tag = |t: &str| {
        json!({"tag": t, "createdAt": "2026-01-01T00:00:00Z",
        "pullPolicy": {"ttlSecondsAfterFinished": 1}})
    };
    let cases = [
        (
            json!({"nginx": {"tags": [tag(""), ]}}),
            "tag for image nginx can not be empty",
        ),
        (
            json!({"nginx": {"tags": [tag("1"), tag("1")]}}),
            "spec.images[nginx].tags[1].tag: Invalid value: \"1\": duplicated tag 1 for image nginx",
        ),
        (
            json!({"nginx": {"tags": [{"tag": "1", "pullPolicy": {"ttlSecondsAfterFinished": 1}}]}}),
            "createdAt field for nginx/1 can not be empty",
        ),
        (
            json!({"nginx": {"tags": [{"tag": "1", "createdAt": "2026-01-01T00:00:00Z"}]}}),
            "pullPolicy field for nginx/1 must set",
        ),
        (
            json!({"nginx": {"tags": [{"tag": "1", "createdAt": "2026-01-01T00:00:00Z",
                "pullPolicy": {}}]}}),
            "pullPolicy.ttlSecondsAfterFinished for nginx/1 must set",
        ),
        (
            json!({"nginx": {"tags": [{"tag": "1", "createdAt": "2026-01-01T00:00:00Z",
                "version": -1, "pullPolicy": {"ttlSecondsAfterFinished": 1}}]}}),
            "version for nginx/1 can not be less than 0",
        ),
    ];
    for (images, want) in cases {
        let got = messages(&nodeimage_errors(&nodeimage(images.clone())));
        assert!(got.contains(want), "{images}: {got}");
    }
    let many: serde_json::Map<String, Value> = (0..=MAX_IMAGES_PER_NODE)
        .map(|i| (format!("img{i}"), json!({"tags": []})))
        .collect();
    let got = messages(&nodeimage_errors(&nodeimage(Value::Object(many))));
    assert!(got.contains("can not be more than 256"), "{got}");
}
