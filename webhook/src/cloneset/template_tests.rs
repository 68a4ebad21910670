//! The dry-run Pod built from a CloneSet, how the API server's answers are read, and the
//! handler that puts both together, against a scripted API server.

use std::sync::Mutex;

use kube::core::Status;
use serde_json::{Value, json};

use super::template::{DRY_RUN_GENERATE_NAME, DryRun, PodDraft, PodDryRun, Verdict, judge};
use crate::field::aggregate;
use crate::review::admit_async;
use crate::review::tests::{response, review_body};

/// What Kubernetes 1.34 answers for a Pod whose first container is called `Main_X`.
const DNS_LABEL_RULE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn status(v: Value) -> Box<Status> {
    Box::new(serde_json::from_value(v).expect("a Status"))
}

fn invalid_name_status() -> Box<Status> {
    let cause = format!("Invalid value: \"Main_X\": {DNS_LABEL_RULE}");
    status(json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Invalid", "code": 422,
        "message": format!("Pod \"kruise-template-check-x7k2p\" is invalid: spec.containers[0].name: {cause}"),
        "details": {"name": "kruise-template-check-x7k2p", "kind": "Pod", "causes": [
            {"reason": "FieldValueInvalid", "message": cause, "field": "spec.containers[0].name"}]}
    }))
}

fn refused(code: u16, reason: &str, message: &str) -> DryRun {
    DryRun::Refused(status(
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "reason": reason, "code": code, "message": message}),
    ))
}

fn cloneset(template_spec: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "cs", "namespace": "ns1", "ownerReferences": [{"name": "x"}]},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "a"}},
            "template": {
                "metadata": {"name": "ignored", "labels": {"app": "a"},
                    "annotations": {"note": "n"}, "finalizers": ["example.com/f"],
                    "ownerReferences": [{"name": "y"}]},
                "spec": template_spec},
            "updateStrategy": {"rollingUpdate": {"maxUnavailable": 1}}}})
}

fn simple() -> Value {
    cloneset(json!({"containers": [{"name": "c", "image": "nginx:1"}]}))
}

#[test]
fn the_dry_run_pod_is_the_template_with_a_fixed_name_and_no_owner() {
    let draft = PodDraft::from_cloneset(&simple(), "ns1").expect("a draft");
    assert_eq!(
        draft.pod,
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": DRY_RUN_GENERATE_NAME, "namespace": "ns1",
                "labels": {"app": "a"}, "annotations": {"note": "n"},
                "finalizers": ["example.com/f"]},
            "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}})
    );
    assert_eq!((draft.template_volumes, draft.claims.len()), (0, 0));
}

#[test]
fn claim_templates_are_mounted_as_claims_after_the_template_volumes() {
    let mut cs = cloneset(json!({"containers": [{"name": "c", "image": "i"}],
        "volumes": [{"name": "v", "emptyDir": {}}]}));
    cs["spec"]["volumeClaimTemplates"] = json!([
        {"metadata": {"name": "data"}}, {"metadata": {}}, {"metadata": {"name": "logs"}}]);
    let draft = PodDraft::from_cloneset(&cs, "ns1").expect("a draft");
    assert_eq!(
        draft.pod["spec"]["volumes"],
        json!([{"name": "v", "emptyDir": {}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "logs", "persistentVolumeClaim": {"claimName": "logs"}}])
    );
    assert_eq!(draft.template_volumes, 1);
    // The nameless claim (reported by the local rules) is not mounted; indices still match.
    assert_eq!(draft.claims, vec![0, 2]);

    // No template volumes at all: the list is created for the claims.
    let mut cs = simple();
    cs["spec"]["volumeClaimTemplates"] = json!([{"metadata": {"name": "data"}}]);
    let draft = PodDraft::from_cloneset(&cs, "ns1").expect("a draft");
    assert_eq!(draft.pod["spec"]["volumes"][0]["name"], "data");
    assert_eq!(draft.template_volumes, 0);
}

#[test]
fn nothing_to_dry_run_without_a_template_spec_object() {
    for spec in [json!(null), json!("x"), json!([1])] {
        let mut cs = simple();
        cs["spec"]["template"]["spec"] = spec.clone();
        assert!(PodDraft::from_cloneset(&cs, "ns1").is_none(), "{spec}");
    }
    assert!(PodDraft::from_cloneset(&json!({"spec": {}}), "ns1").is_none());
    // A volumes field that is not a list is sent as it is, for the API server to name.
    let cs = cloneset(json!({"containers": [], "volumes": "x"}));
    let draft = PodDraft::from_cloneset(&cs, "ns1").expect("a draft");
    assert_eq!(draft.pod["spec"]["volumes"], "x");
}

#[test]
fn pod_fields_map_to_cloneset_paths() {
    let draft = PodDraft {
        pod: json!({}),
        template_volumes: 2,
        claims: vec![0, 3],
    };
    let cases = [
        ("", "spec.template"),
        (
            "spec.containers[0].name",
            "spec.template.spec.containers[0].name",
        ),
        ("metadata.labels", "spec.template.metadata.labels"),
        (
            "metadata.annotations[a/b/c]",
            "spec.template.metadata.annotations[a/b/c]",
        ),
        ("spec.volumes[1].name", "spec.template.spec.volumes[1].name"),
        (
            "spec.volumes[2].name",
            "spec.volumeClaimTemplates[0].metadata.name",
        ),
        (
            "spec.volumes[3].persistentVolumeClaim.claimName",
            "spec.volumeClaimTemplates[3].metadata.name",
        ),
        // Past the mocked claims: left on the template (cannot happen, must not panic).
        ("spec.volumes[9].name", "spec.template.spec.volumes[9].name"),
        ("spec.volumes[x].name", "spec.template.spec.volumes[x].name"),
    ];
    for (field, want) in cases {
        assert_eq!(draft.cloneset_path(field), want, "{field}");
    }
}

fn draft() -> PodDraft {
    PodDraft::from_cloneset(&simple(), "ns1").expect("a draft")
}

fn messages(v: Verdict) -> String {
    match v {
        Verdict::Invalid(errs) => aggregate(&errs),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn invalid_pods_become_errors_on_the_template() {
    assert_eq!(
        messages(judge(&draft(), DryRun::Refused(invalid_name_status()))),
        format!(
            "spec.template.spec.containers[0].name: Invalid value: \"Main_X\": {DNS_LABEL_RULE}"
        )
    );
    // Several causes, one of them without a message.
    let s = status(
        json!({"code": 422, "reason": "Invalid", "message": "Pod \"p\" is invalid: [..]",
        "details": {"causes": [
            {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers[0].image"},
            {"reason": "FieldValueNotSupported", "field": "spec.dnsPolicy"}]}}),
    );
    assert_eq!(
        messages(judge(&draft(), DryRun::Refused(s))),
        "[spec.template.spec.containers[0].image: Required value, spec.template.spec.dnsPolicy: FieldValueNotSupported]"
    );
    // 422 without causes: the message, without the name of a Pod nobody wrote.
    assert_eq!(
        messages(judge(
            &draft(),
            refused(
                422,
                "Invalid",
                "Pod \"kruise-template-check-abcde\" is invalid: spec: Forbidden: x"
            )
        )),
        "spec.template: spec: Forbidden: x"
    );
    // 400: the template does not decode as a Pod.
    let decode = "Pod in version \"v1\" cannot be handled as a Pod: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
    assert_eq!(
        messages(judge(&draft(), refused(400, "BadRequest", decode))),
        format!("spec.template: {decode}")
    );
}

#[test]
fn refusals_that_are_not_about_the_template_do_not_judge_it() {
    let not_judged = [
        refused(
            403,
            "Forbidden",
            "pods \"kruise-template-check-x\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=0, limited: pods=0",
        ),
        refused(
            403,
            "Forbidden",
            "pods \"x\" is forbidden: failed quota: q: must specify limits.cpu for: c",
        ),
        refused(
            403,
            "Forbidden",
            "pods \"x\" is forbidden: maximum cpu usage per Container is 1, but limit is 2",
        ),
        refused(
            403,
            "Forbidden",
            "pods \"x\" is forbidden: violates PodSecurity \"restricted:latest\": runAsNonRoot != true",
        ),
        refused(
            403,
            "Forbidden",
            "pods \"x\" is forbidden: unable to create new content in namespace ns1 because it is being terminated",
        ),
        refused(
            403,
            "Forbidden",
            "pods is forbidden: User \"system:serviceaccount:kruise-system:kruise-manager\" cannot create resource \"pods\"",
        ),
        refused(404, "NotFound", "namespaces \"ns1\" not found"),
        refused(
            400,
            "BadRequest",
            "admission webhook \"policy.example.com\" denied the request: images must come from our registry",
        ),
        refused(
            422,
            "Invalid",
            "admission webhook \"mpod.kb.io\" denied the request: spec.containers[1].env[KRUISE_CONTAINER_PRIORITY]: Invalid value",
        ),
        refused(
            500,
            "InternalError",
            "Internal error occurred: failed calling webhook \"sidecar.example.com\": connection refused",
        ),
    ];
    for outcome in not_judged {
        let v = judge(&draft(), outcome.clone());
        assert!(matches!(v, Verdict::NotJudged(_)), "{outcome:?}: {v:?}");
    }
}

#[test]
fn no_answer_is_unavailable_and_acceptance_is_valid() {
    for outcome in [
        refused(500, "InternalError", "etcdserver: request timed out"),
        refused(429, "TooManyRequests", "too many requests"),
        refused(401, "Unauthorized", "Unauthorized"),
        DryRun::Unavailable("no answer within 5s".into()),
    ] {
        let v = judge(&draft(), outcome.clone());
        assert!(matches!(v, Verdict::Unavailable(_)), "{outcome:?}: {v:?}");
    }
    assert_eq!(judge(&draft(), DryRun::Accepted), Verdict::Valid);
    assert_eq!(judge(&draft(), DryRun::Disabled), Verdict::Valid);
}

/// An API server that answers every dry-run with one outcome and records what it was sent.
struct Scripted {
    answer: DryRun,
    sent: Mutex<Vec<(String, Value)>>,
}

impl Scripted {
    fn new(answer: DryRun) -> Self {
        Self {
            answer,
            sent: Mutex::new(Vec::new()),
        }
    }

    fn calls(&self) -> usize {
        self.sent.lock().map(|s| s.len()).unwrap_or(usize::MAX)
    }
}

impl PodDryRun for Scripted {
    async fn dry_run_create(&self, namespace: &str, pod: &Value) -> DryRun {
        if let Ok(mut s) = self.sent.lock() {
            s.push((namespace.to_owned(), pod.clone()));
        }
        self.answer.clone()
    }
}

fn run(op: &str, obj: Value, old: Option<Value>, api: &Scripted) -> Value {
    let body = review_body(
        op,
        ("apps.kruise.io", "v1beta1", "CloneSet"),
        "clonesets",
        Some(obj),
        old,
    );
    let out = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(admit_async(&body, |req| async move {
            super::template::validate(req, api).await
        }));
    response(&out)
}

fn message(r: &Value) -> &str {
    r["status"]["message"].as_str().unwrap_or_default()
}

#[test]
fn a_template_kubernetes_refuses_refuses_the_cloneset() {
    let api = Scripted::new(DryRun::Refused(invalid_name_status()));
    let r = run("CREATE", simple(), None, &api);
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(r["status"]["code"], 422);
    assert_eq!(
        message(&r),
        format!(
            "spec.template.spec.containers[0].name: Invalid value: \"Main_X\": {DNS_LABEL_RULE}"
        )
    );
    // The request's namespace, the draft Pod.
    let sent = api.sent.lock().expect("lock").clone();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, "default");
    assert_eq!(sent[0].1["metadata"]["generateName"], DRY_RUN_GENERATE_NAME);
}

#[test]
fn local_and_server_errors_are_both_reported_once_per_field() {
    let s = status(
        json!({"code": 422, "reason": "Invalid", "message": "m", "details": {"causes": [
        {"reason": "FieldValueDuplicate", "message": "Duplicate value: \"c\"", "field": "spec.containers[1].name"},
        {"reason": "FieldValueInvalid", "message": "Invalid value: \"A\": bad env name", "field": "spec.containers[0].env[0].name"}]}}),
    );
    let api = Scripted::new(DryRun::Refused(s));
    let mut cs = cloneset(json!({"containers": [
        {"name": "c", "image": "i", "env": [{"name": "A"}]}, {"name": "c", "image": "i"}]}));
    cs["spec"]["revisionHistoryLimit"] = json!(-1);
    let r = run("CREATE", cs, None, &api);
    assert_eq!(
        message(&r),
        "[spec.template.spec.containers[1].name: Invalid value: \"c\": Duplicate value, \
         spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0, \
         spec.template.spec.containers[0].env[0].name: Invalid value: \"A\": bad env name]"
    );
}

#[test]
fn an_update_that_keeps_the_template_is_not_dry_run() {
    let api = Scripted::new(DryRun::Refused(invalid_name_status()));
    let old = simple();
    let mut scaled = simple();
    scaled["spec"]["replicas"] = json!(5);
    scaled["metadata"]["finalizers"] = json!([]);
    let r = run("UPDATE", scaled, Some(old.clone()), &api);
    assert_eq!(r["allowed"], true, "{r}");
    assert_eq!(api.calls(), 0);

    let mut changed = simple();
    changed["spec"]["template"]["spec"]["containers"][0]["name"] = json!("Main_X");
    let r = run("UPDATE", changed, Some(old.clone()), &api);
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(api.calls(), 1);

    let mut claims = simple();
    claims["spec"]["volumeClaimTemplates"] = json!([{"metadata": {"name": "d"}}]);
    run("UPDATE", claims, Some(old), &api);
    assert_eq!(api.calls(), 2);
}

#[test]
fn an_update_of_images_only_is_not_dry_run() {
    let api = Scripted::new(DryRun::Refused(invalid_name_status()));
    let two = |main: &str, init: &str| {
        cloneset(json!({
            "initContainers": [{"name": "init", "image": init}],
            "containers": [{"name": "main", "image": main}]}))
    };
    let old = two("app:v1", "init:v1");
    let r = run("UPDATE", two("app:v2", "init:v2"), Some(old.clone()), &api);
    assert_eq!(r["allowed"], true, "{r}");
    assert_eq!(api.calls(), 0);

    // An image Kubernetes would refuse, or anything besides images, is dry-run.
    run("UPDATE", two(" app:v2", "init:v1"), Some(old.clone()), &api);
    assert_eq!(api.calls(), 1);
    let mut more = two("app:v2", "init:v1");
    more["spec"]["template"]["spec"]["containers"][0]["name"] = json!("Main_X");
    let r = run("UPDATE", more, Some(old.clone()), &api);
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(api.calls(), 2);
    let mut added = two("app:v2", "init:v1");
    added["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(json!({"name": "side", "image": "side:v1"}));
    run("UPDATE", added, Some(old), &api);
    assert_eq!(api.calls(), 3);
}

#[test]
fn quota_does_not_make_a_cloneset_invalid() {
    let api = Scripted::new(refused(
        403,
        "Forbidden",
        "pods \"x\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=0, limited: pods=0",
    ));
    let r = run("CREATE", simple(), None, &api);
    assert_eq!(r["allowed"], true, "{r}");
    assert_eq!(api.calls(), 1);
}

#[test]
fn an_api_server_that_does_not_answer_fails_closed_with_a_reason() {
    let api = Scripted::new(DryRun::Unavailable("no answer within 5s".into()));
    let r = run("CREATE", simple(), None, &api);
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(r["status"]["code"], 503);
    assert!(
        message(&r).starts_with("spec.template: could not be validated")
            && message(&r).contains("no answer within 5s"),
        "{r}"
    );
    // Already invalid: the known errors, not the outage.
    let mut cs = simple();
    cs["spec"]["replicas"] = json!(-1);
    let r = run("CREATE", cs, None, &api);
    assert_eq!(r["status"]["code"], 422);
    assert_eq!(
        message(&r),
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );
}

#[test]
fn deletes_are_not_dry_run() {
    let api = Scripted::new(DryRun::Unavailable("x".into()));
    let body = review_body(
        "DELETE",
        ("apps.kruise.io", "v1beta1", "CloneSet"),
        "clonesets",
        None,
        Some(simple()),
    );
    let out = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(admit_async(&body, |req| {
            let api = &api;
            async move { super::template::validate(req, api).await }
        }));
    assert_eq!(response(&out)["allowed"], true);
    assert_eq!(api.calls(), 0);
}

#[test]
fn the_served_path_dry_runs_and_the_client_less_server_says_why() {
    // Through the router's entry point, with the real client type but no client.
    let pods = crate::cluster::ApiCluster {
        client: None,
        timeout: std::time::Duration::from_secs(1),
        template_dry_run: true,
        sidecar_sets: None,
        budgets: None,
        persistent_pod_states: None,
        workload_spreads: None,
        pod_probe_markers: None,
        pod_marks: None,
        metrics: Default::default(),
    };
    let body = review_body(
        "CREATE",
        ("apps.kruise.io", "v1beta1", "CloneSet"),
        "clonesets",
        Some(simple()),
        None,
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    for path in [
        crate::paths::VALIDATE_CLONESET,
        crate::paths::VALIDATE_CLONESET_V1BETA1,
    ] {
        let out = rt
            .block_on(crate::handle_admission_async(
                path,
                &body,
                &pods,
                &Default::default(),
            ))
            .expect("served");
        let r = response(&out);
        assert_eq!(r["status"]["code"], 503, "{r}");
        assert!(message(&r).contains("no Kubernetes client"), "{r}");
    }
    // Switched off: only the local rules.
    let off = crate::cluster::ApiCluster {
        template_dry_run: false,
        sidecar_sets: None,
        ..pods
    };
    let out = rt
        .block_on(crate::handle_admission_async(
            crate::paths::VALIDATE_CLONESET,
            &body,
            &off,
            &Default::default(),
        ))
        .expect("served");
    assert_eq!(response(&out)["allowed"], true);
}
