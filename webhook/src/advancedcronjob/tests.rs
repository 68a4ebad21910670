use serde_json::{Value, json};

use super::defaults::default_advancedcronjob;
use super::validation::advancedcronjob_errors;
use crate::field::aggregate;

fn acj(spec: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "AdvancedCronJob",
        "metadata": {"name": "c", "namespace": "ns"}, "spec": spec})
}

fn pod() -> Value {
    json!({"spec": {"containers": [{"name": "c", "image": "busybox:1"}], "restartPolicy": "Never"}})
}

fn job_spec(schedule: &str) -> Value {
    json!({"schedule": schedule, "template": {"jobTemplate": {"spec": {"template": pod()}}}})
}

fn errors(v: &Value) -> String {
    aggregate(&advancedcronjob_errors(v))
}

#[test]
fn defaults_as_upstream() {
    let mut c = acj(json!({"schedule": "@hourly",
        "template": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}}}));
    assert!(default_advancedcronjob(&mut c, true));
    let s = &c["spec"];
    assert_eq!(s["concurrencyPolicy"], "Allow");
    assert_eq!(s["paused"], false);
    assert_eq!(s["successfulJobsHistoryLimit"], 3);
    assert_eq!(s["failedJobsHistoryLimit"], 1);
    // Upstream's Pod defaults reach the Job's Pod.
    assert_eq!(
        s["template"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"],
        "Always"
    );
    // An ImageListPullJob template: Replace, and the pull defaults while its type is unset.
    let mut c = acj(
        json!({"schedule": "@hourly", "successfulJobsHistoryLimit": 0,
        "template": {"imageListPullJobTemplate": {"spec": {"images": ["nginx:1"]}}}}),
    );
    assert!(default_advancedcronjob(&mut c, true));
    let s = &c["spec"];
    assert_eq!(s["concurrencyPolicy"], "Replace");
    assert_eq!(s["successfulJobsHistoryLimit"], 0);
    let t = &s["template"]["imageListPullJobTemplate"]["spec"];
    assert_eq!(t["completionPolicy"]["type"], "Always");
    assert_eq!(t["pullPolicy"]["timeoutSeconds"], 600);
    assert_eq!(t["pullPolicy"]["backoffLimit"], 3);
    assert_eq!(t["imagePullPolicy"], "IfNotPresent");
    // No template defaults when the template did not change.
    let mut c = acj(job_spec("@hourly"));
    assert!(default_advancedcronjob(&mut c, false));
    assert!(
        c["spec"]["template"]["jobTemplate"]["spec"]["template"]["spec"]
            .get("dnsPolicy")
            .is_none()
    );
    assert!(!default_advancedcronjob(
        &mut acj(
            json!({"schedule": "@hourly", "template": {"jobTemplate": {"spec": {"template": {"spec": 3}}}}})
        ),
        true
    ));
}

#[test]
fn valid_objects_pass() {
    for spec in [
        job_spec("*/1 * * * *"),
        job_spec("@every 10s"),
        job_spec("TZ=Asia/Shanghai 0 10 * * ?"),
        json!({"schedule": "0 10 * * *", "timeZone": "Europe/Berlin",
            "startingDeadlineSeconds": 0, "successfulJobsHistoryLimit": 0,
            "failedJobsHistoryLimit": 0, "concurrencyPolicy": "Forbid", "paused": true,
            "template": {"broadcastJobTemplate": {"spec": {"template": pod()}}}}),
        json!({"schedule": "@daily", "concurrencyPolicy": "Replace",
            "template": {"imageListPullJobTemplate": {"spec": {"images": ["nginx:1"],
                "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 1200},
                "pullPolicy": {"timeoutSeconds": 600}}}}}),
    ] {
        assert_eq!(errors(&acj(spec.clone())), "", "{spec}");
    }
}

#[test]
fn each_refusal_names_its_field() {
    let bad = |patch: Value| {
        let mut s = job_spec("*/1 * * * *");
        if let (Value::Object(s), Value::Object(p)) = (&mut s, patch) {
            s.extend(p);
        }
        errors(&acj(s))
    };
    let cases = [
        (
            bad(json!({"schedule": ""})),
            "spec.schedule: Invalid value: \"\": schedule cannot be empty",
        ),
        (
            bad(json!({"schedule": "61 * * * *"})),
            "spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61",
        ),
        (
            bad(json!({"schedule": "* * * *"})),
            "spec.schedule: Invalid value: \"* * * *\": expected exactly 5 fields, found 4",
        ),
        (
            bad(json!({"schedule": "@every 1d"})),
            "spec.schedule: Invalid value: \"@every 1d\": failed to parse duration",
        ),
        (
            bad(json!({"schedule": "TZ=Nowhere/City * * * * *"})),
            "spec.schedule: Invalid value: \"TZ=Nowhere/City * * * * *\": provided bad location Nowhere/City",
        ),
        (
            bad(json!({"schedule": "TZ=UTC * * * * *", "timeZone": "UTC"})),
            "spec.schedule: Invalid value: \"TZ=UTC * * * * *\": cannot use both timeZone field and TZ or CRON_TZ in schedule",
        ),
        (
            bad(json!({"timeZone": "Mars/Olympus"})),
            "spec.timeZone: Invalid value: \"Mars/Olympus\": provided bad location Mars/Olympus",
        ),
        (
            bad(json!({"timeZone": ""})),
            "spec.timeZone: Invalid value: \"\": timeZone must be nil or non-empty string",
        ),
        (
            bad(json!({"timeZone": "local"})),
            "spec.timeZone: Invalid value: \"local\": timeZone must be an explicit time zone",
        ),
        (
            bad(json!({"startingDeadlineSeconds": -1})),
            "spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            bad(json!({"successfulJobsHistoryLimit": -1})),
            "spec.successfulJobsHistoryLimit: Invalid value: -1",
        ),
        (
            bad(json!({"failedJobsHistoryLimit": -2})),
            "spec.failedJobsHistoryLimit: Invalid value: -2",
        ),
        (
            bad(json!({"concurrencyPolicy": "Sometimes"})),
            "spec.concurrencyPolicy: Unsupported value: \"Sometimes\"",
        ),
        (
            bad(json!({"template": {}})),
            "spec.template: Forbidden: spec must have one template",
        ),
        (
            bad(
                json!({"template": {"jobTemplate": {"spec": {"template": pod()}},
            "broadcastJobTemplate": {"spec": {"template": pod()}}}}),
            ),
            "spec.template: Forbidden: spec can have only one template, either JobTemplate or BroadcastJobTemplate or ImageListPullJobTemplate should be provided (set: jobTemplate, broadcastJobTemplate)",
        ),
        (
            bad(
                json!({"template": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Always"}}}}}}),
            ),
            "spec.template.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: \"Always\"",
        ),
        (
            bad(
                json!({"template": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [], "restartPolicy": "Never"}}}}}}),
            ),
            "spec.template.jobTemplate.spec.template.spec.containers: Required value",
        ),
        (
            bad(
                json!({"template": {"broadcastJobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c"}], "restartPolicy": "Never"}}}}}}),
            ),
            "spec.template.broadcastJobTemplate.spec.template.spec.containers[0].image: Required value",
        ),
        (
            bad(
                json!({"template": {"imageListPullJobTemplate": {"spec": {"images": ["nginx:1"], "completionPolicy": {"type": "Always"}}}}}),
            ),
            "spec.concurrencyPolicy: Invalid value: null: concurrencyPolicy should be Replace or Forbid",
        ),
        (
            bad(
                json!({"concurrencyPolicy": "Forbid", "template": {"imageListPullJobTemplate": {"spec": {"images": [], "completionPolicy": {"type": "Always"}}}}}),
            ),
            "spec.template.imageListPullJobTemplate.spec.images: Required value",
        ),
        (
            bad(
                json!({"concurrencyPolicy": "Forbid", "template": {"imageListPullJobTemplate": {"spec": {"images": ["a:1"], "completionPolicy": {"type": "Never"}}}}}),
            ),
            "spec.template.imageListPullJobTemplate.spec.completionPolicy.type: Invalid value: \"Never\": completionPolicy should be Always",
        ),
        (
            bad(
                json!({"concurrencyPolicy": "Forbid", "template": {"imageListPullJobTemplate": {"spec": {"images": ["a:1"], "completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 5}}}}}),
            ),
            "spec.template.imageListPullJobTemplate.spec.completionPolicy.ttlSecondsAfterFinished: Invalid value: 5: ttlSecondsAfterFinished is not supported in advancedCronJob",
        ),
        (
            bad(
                json!({"concurrencyPolicy": "Forbid", "template": {"imageListPullJobTemplate": {"spec": {"images": ["a:1"], "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 86401}}}}}),
            ),
            "spec.template.imageListPullJobTemplate.spec.completionPolicy.activeDeadlineSeconds: Invalid value: 86401: activeDeadlineSeconds must be less than 86400",
        ),
        (
            bad(
                json!({"concurrencyPolicy": "Forbid", "template": {"imageListPullJobTemplate": {"spec": {"images": ["a:1"], "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 60}, "pullPolicy": {"timeoutSeconds": 600}}}}}),
            ),
            "must be greater than pullPolicy.timeoutSeconds(600)",
        ),
    ];
    for (got, want) in cases {
        assert!(got.contains(want), "{got:?} lacks {want:?}");
    }
    let mut long = acj(job_spec("@hourly"));
    long["metadata"]["name"] = json!("a".repeat(64));
    assert!(errors(&long).contains("metadata.name: Invalid value"));
    long["metadata"]["name"] = json!("a.b");
    assert!(errors(&long).contains("must consist of alphanumeric characters or '-'"));
}

#[test]
fn updates_change_only_the_mutable_fields() {
    use crate::review::admit;
    use crate::review::tests::{response, review_body};
    let old = acj(job_spec("*/1 * * * *"));
    let review = |new: &Value| {
        let body = review_body(
            "UPDATE",
            ("apps.kruise.io", "v1beta1", "AdvancedCronJob"),
            "advancedcronjobs",
            Some(new.clone()),
            Some(old.clone()),
        );
        response(&admit(&body, super::validation::validate))
    };
    let mut ok = old.clone();
    ok["spec"]["schedule"] = json!("@every 30s");
    ok["spec"]["paused"] = json!(true);
    ok["spec"]["concurrencyPolicy"] = json!("Forbid");
    ok["spec"]["successfulJobsHistoryLimit"] = json!(1);
    ok["spec"]["timeZone"] = json!("Europe/Berlin");
    assert_eq!(review(&ok)["allowed"], true);
    let mut changed = old.clone();
    changed["spec"]["template"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!("busybox:2");
    let out = review(&changed);
    assert_eq!(out["allowed"], false);
    let msg = out["status"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("spec: Forbidden: updates to advancedcronjob spec for fields other than"),
        "{msg}"
    );
}
