use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys;
use kruise_api::policy::v1alpha1::{
    PodUnavailableBudget, PodUnavailableBudgetStatus, TargetReference,
};
use kube::core::admission::Operation;
use serde_json::{Value, json};

use super::unavailable_budget::related_budget;
use super::validate_pod;
use crate::crr::mutation::PodLookup;
use crate::podunavailablebudget::{PubLookup, StatusWrite};
use crate::review::{Outcome, Request};

/// One budget in the "cluster", the Pods, and what happened to them.
struct Cluster {
    budget: Mutex<Option<PodUnavailableBudget>>,
    pods: Vec<Pod>,
    reads: AtomicUsize,
    writes: AtomicUsize,
    conflicts_left: AtomicUsize,
    /// The Pods whose refusal was recorded (upstream's Event).
    refused: Mutex<Vec<String>>,
}

impl crate::persistentpodstate::PpsLookup for Cluster {}
impl crate::workloadspread::WsLookup for Cluster {}
impl crate::podprobemarker::PpmLookup for Cluster {}
impl crate::statefulset::claims::StorageClassLookup for Cluster {}
impl crate::configuration::scope::ScopeLookup for Cluster {}

impl PubLookup for Cluster {
    async fn budgets(&self, _ns: &str) -> Result<Vec<PodUnavailableBudget>, String> {
        Ok(self
            .budget
            .lock()
            .expect("lock")
            .clone()
            .into_iter()
            .collect())
    }
    async fn budget(&self, _ns: &str, name: &str) -> Result<Option<PodUnavailableBudget>, String> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        Ok(self
            .budget
            .lock()
            .expect("lock")
            .clone()
            .filter(|b| b.metadata.name.as_deref() == Some(name)))
    }
    async fn write_budget_status(&self, b: &PodUnavailableBudget) -> Result<StatusWrite, String> {
        if self.conflicts_left.load(Ordering::SeqCst) > 0 {
            self.conflicts_left.fetch_sub(1, Ordering::SeqCst);
            return Ok(StatusWrite::Conflict);
        }
        self.writes.fetch_add(1, Ordering::SeqCst);
        *self.budget.lock().expect("lock") = Some(b.clone());
        Ok(StatusWrite::Written)
    }
    fn refused(&self, pod: &Pod, _username: &str) {
        self.refused
            .lock()
            .expect("lock")
            .push(pod.metadata.name.clone().unwrap_or_default());
    }
}

impl crate::sidecarset::SidecarSetLookup for Cluster {}
impl crate::deletionprotection::ProtectionLookup for Cluster {}

impl PodLookup for Cluster {
    async fn pod(&self, _ns: &str, name: &str) -> Result<Option<Pod>, String> {
        Ok(self
            .pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .cloned())
    }
}

fn pod_json(name: &str, ready: bool, annotations: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"}, "annotations": annotations},
        "spec": {"containers": [{"name": "main", "image": "nginx:1"}]},
        "status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
    })
}

fn marked(name: &str, ready: bool) -> Value {
    pod_json(name, ready, json!({keys::PUB_RELATED_ANNOTATION: "pub"}))
}

fn budget(allowed: i32) -> PodUnavailableBudget {
    let mut b: PodUnavailableBudget = serde_json::from_value(json!({
        "apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
        "metadata": {"name": "pub", "namespace": "ns"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}
    }))
    .expect("budget");
    b.status = Some(PodUnavailableBudgetStatus {
        unavailable_allowed: allowed,
        current_available: 3,
        desired_available: 2,
        total_replicas: 3,
        ..Default::default()
    });
    b
}

fn cluster(allowed: i32, pods: &[Value]) -> Cluster {
    Cluster {
        budget: Mutex::new(Some(budget(allowed))),
        pods: pods
            .iter()
            .map(|p| serde_json::from_value(p.clone()).expect("pod"))
            .collect(),
        reads: AtomicUsize::new(0),
        writes: AtomicUsize::new(0),
        conflicts_left: AtomicUsize::new(0),
        refused: Mutex::default(),
    }
}

fn request(
    op: Operation,
    sub: Option<&str>,
    name: &str,
    object: Option<Value>,
    old: Option<Value>,
) -> Request {
    Request {
        uid: "u".into(),
        operation: op,
        group: String::new(),
        version: "v1".into(),
        kind: if sub.is_some() { "Eviction" } else { "Pod" }.into(),
        resource: "pods".into(),
        sub_resource: sub.map(str::to_owned),
        namespace: Some("ns".into()),
        name: name.into(),
        object,
        old_object: old,
        options: None,
        dry_run: false,
        username: "tester".to_owned(),
    }
}

fn eviction(name: &str, dry_run: bool) -> Request {
    let mut body = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "ns"}});
    if dry_run {
        body["deleteOptions"] = json!({"dryRun": ["All"]});
    }
    request(Operation::Create, Some("eviction"), name, Some(body), None)
}

fn delete(pod: Value) -> Request {
    let name = pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    request(Operation::Delete, None, &name, None, Some(pod))
}

fn status(c: &Cluster) -> PodUnavailableBudgetStatus {
    c.budget
        .lock()
        .expect("lock")
        .clone()
        .and_then(|b| b.status)
        .unwrap_or_default()
}

fn gates() -> FeatureGates {
    FeatureGates::default()
}

#[tokio::test]
async fn first_eviction_is_charged_second_gets_429_delete_gets_403() {
    let c = cluster(1, &[marked("a", true), marked("b", true)]);
    let out = validate_pod(eviction("a", false), None, &c, &gates()).await;
    assert_eq!(out, Outcome::Allow);
    let st = status(&c);
    assert_eq!(st.unavailable_allowed, 0);
    assert!(st.disrupted_pods.contains_key("a"), "{st:?}");
    let Outcome::Deny {
        code,
        reason,
        message,
    } = validate_pod(eviction("b", false), None, &c, &gates()).await
    else {
        panic!("the second eviction must be refused");
    };
    assert_eq!((code, reason), (429, "TooManyRequests"));
    assert_eq!(
        message,
        r#"podunavailablebudget.policy.kruise.io "pub" is forbidden: pub unavailable allowed is negative"#
    );
    let Outcome::Deny { code, .. } =
        validate_pod(delete(marked("b", true)), None, &c, &gates()).await
    else {
        panic!("the delete must be refused");
    };
    assert_eq!(code, 403);
    // Pod a is recorded: deleting it now costs nothing more.
    assert_eq!(
        validate_pod(delete(marked("a", true)), None, &c, &gates()).await,
        Outcome::Allow
    );
    assert_eq!(c.writes.load(Ordering::SeqCst), 1);
    // Each refusal, and only those, is recorded on its Pod (upstream's Event).
    assert_eq!(*c.refused.lock().expect("lock"), ["b", "b"]);
}

#[tokio::test]
async fn dry_runs_check_without_charging() {
    let c = cluster(1, &[marked("a", true)]);
    let opts = Some(json!({"dryRun": ["All"]}));
    assert_eq!(
        validate_pod(delete(marked("a", true)), opts, &c, &gates()).await,
        Outcome::Allow
    );
    assert_eq!(
        validate_pod(eviction("a", true), None, &c, &gates()).await,
        Outcome::Allow
    );
    assert_eq!(c.writes.load(Ordering::SeqCst), 0);
    assert_eq!(status(&c).unavailable_allowed, 1);
    // A dry run is still refused when the budget is spent.
    let spent = cluster(0, &[marked("a", true)]);
    let out = validate_pod(
        delete(marked("a", true)),
        Some(json!({"dryRun": ["All"]})),
        &spent,
        &gates(),
    )
    .await;
    assert!(matches!(out, Outcome::Deny { code: 403, .. }), "{out:?}");
}

#[tokio::test]
async fn pods_that_do_not_count_pass_uncharged() {
    let c = cluster(0, &[]);
    // Not ready.
    assert_eq!(
        validate_pod(delete(marked("a", false)), None, &c, &gates()).await,
        Outcome::Allow
    );
    // The unavailable label.
    let mut p = marked("a", true);
    p["metadata"]["labels"][format!("{}drain", keys::UNAVAILABLE_POD_LABEL_PREFIX)] = json!("true");
    assert_eq!(
        validate_pod(delete(p), None, &c, &gates()).await,
        Outcome::Allow
    );
    // pub.kruise.io/no-protect.
    let p = pod_json(
        "a",
        true,
        json!({keys::PUB_RELATED_ANNOTATION: "pub", keys::PUB_NO_PROTECT_ANNOTATION: "true"}),
    );
    assert_eq!(
        validate_pod(delete(p), None, &c, &gates()).await,
        Outcome::Allow
    );
    // Under no budget: not even a read.
    assert_eq!(
        validate_pod(delete(pod_json("x", true, json!({}))), None, &c, &gates()).await,
        Outcome::Allow
    );
    assert_eq!(c.reads.load(Ordering::SeqCst), 0);
    assert_eq!(c.writes.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_conflicting_write_is_retried_on_a_fresh_copy() {
    let c = cluster(1, &[]);
    c.conflicts_left.store(1, Ordering::SeqCst);
    assert_eq!(
        validate_pod(delete(marked("a", true)), None, &c, &gates()).await,
        Outcome::Allow
    );
    assert_eq!(c.writes.load(Ordering::SeqCst), 1);
    assert!(status(&c).disrupted_pods.contains_key("a"));
}

#[tokio::test]
async fn delete_gate_off_admits_everything() {
    let c = cluster(0, &[marked("a", true)]);
    let off = gates().with(Gate::PodUnavailableBudgetDeleteGate, false);
    assert_eq!(
        validate_pod(delete(marked("a", true)), None, &c, &off).await,
        Outcome::Allow
    );
    assert_eq!(
        validate_pod(eviction("a", false), None, &c, &off).await,
        Outcome::Allow
    );
}

#[tokio::test]
async fn in_place_updates_are_charged_under_the_update_gate() {
    let old = marked("a", true);
    let mut new = old.clone();
    new["spec"]["containers"][0]["image"] = json!("nginx:2");
    let update = || {
        request(
            Operation::Update,
            None,
            "a",
            Some(new.clone()),
            Some(old.clone()),
        )
    };
    let c = cluster(1, &[]);
    // Upstream's default: the update gate is off.
    assert_eq!(
        validate_pod(update(), None, &c, &gates()).await,
        Outcome::Allow
    );
    assert_eq!(c.writes.load(Ordering::SeqCst), 0);
    let on = gates().with(Gate::PodUnavailableBudgetUpdateGate, true);
    assert_eq!(validate_pod(update(), None, &c, &on).await, Outcome::Allow);
    let st = status(&c);
    assert!(
        st.unavailable_pods.contains_key("a") && st.disrupted_pods.is_empty(),
        "{st:?}"
    );
    // A metadata-only change is no disruption.
    let mut labelled = old.clone();
    labelled["metadata"]["labels"]["x"] = json!("y");
    let spent = cluster(0, &[]);
    let out = validate_pod(
        request(
            Operation::Update,
            None,
            "a",
            Some(labelled),
            Some(old.clone()),
        ),
        None,
        &spent,
        &on,
    )
    .await;
    assert_eq!(out, Outcome::Allow);
    let out = validate_pod(update(), None, &spent, &on).await;
    assert!(matches!(out, Outcome::Deny { code: 403, .. }), "{out:?}");
}

#[tokio::test]
async fn new_pods_are_marked_by_selector_or_workload() {
    let c = cluster(1, &[]);
    let pod: Pod = serde_json::from_value(pod_json("n", true, json!({}))).expect("pod");
    assert_eq!(related_budget(&pod, "ns", &c).await.as_deref(), Some("pub"));
    let mut other: Pod = pod.clone();
    other.metadata.labels = Some(BTreeMap::from([("app".into(), "db".into())]));
    assert_eq!(related_budget(&other, "ns", &c).await, None);
    // A targetRef budget: the Pod's CloneSet, whatever its labels.
    let mut b = budget(1);
    b.spec.selector = None;
    b.spec.target_reference = Some(TargetReference {
        api_version: "apps.kruise.io/v1beta1".into(),
        kind: "CloneSet".into(),
        name: "web".into(),
    });
    *c.budget.lock().expect("lock") = Some(b);
    other.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps.kruise.io/v1alpha1".into(),
        kind: "CloneSet".into(),
        name: "web".into(),
        uid: "u".into(),
        controller: Some(true),
        ..Default::default()
    }]);
    assert_eq!(
        related_budget(&other, "ns", &c).await.as_deref(),
        Some("pub")
    );
}

#[tokio::test]
async fn mutate_pod_sets_the_annotation_at_create() {
    let c = cluster(1, &[]);
    let req = request(
        Operation::Create,
        None,
        "n",
        Some(pod_json("n", true, json!({}))),
        None,
    );
    let out = super::mutate_pod(req, &c, &gates()).await;
    let Outcome::Patch(patch) = out else {
        panic!("expected a patch, got {out:?}")
    };
    let text = serde_json::to_string(&patch).expect("patch");
    assert!(
        text.contains("kruise.io~1related-pub") || text.contains("kruise.io/related-pub"),
        "{text}"
    );
}

#[test]
fn validate_pod_is_registered_as_upstream() {
    let cfg = crate::WebhookConfig::default();
    let conf = crate::configuration::validating::validating_configuration(&cfg, "ca");
    let hooks = conf.webhooks.unwrap_or_default();
    let find = |name: &str| hooks.iter().find(|h| h.name == name).expect(name).clone();
    for (name, ops, resource) in [
        ("vpod.kb.io", vec!["UPDATE", "DELETE"], "pods"),
        ("vpodeviction.kb.io", vec!["CREATE"], "pods/eviction"),
    ] {
        let h = find(name);
        let svc = h.client_config.service.clone().expect("service");
        assert_eq!(svc.path.as_deref(), Some("/validate-pod"));
        let rule = &h.rules.clone().expect("rules")[0];
        assert_eq!(
            rule.api_groups.clone().unwrap_or_default(),
            vec![String::new()]
        );
        assert_eq!(rule.operations.clone().unwrap_or_default(), ops);
        assert_eq!(
            rule.resources.clone().unwrap_or_default(),
            vec![resource.to_owned()]
        );
        assert!(
            h.namespace_selector.is_some(),
            "kube-system and our namespace are left alone"
        );
    }
    assert!(crate::paths::ADMISSION.contains(&"/validate-pod"));
}

impl crate::cloneset::template::PodDryRun for Cluster {
    async fn dry_run_create(&self, _ns: &str, _pod: &Value) -> crate::cloneset::template::DryRun {
        crate::cloneset::template::DryRun::Accepted
    }
}

/// The body of a `/validate-pod` review of Pod `a` in `ns` (uid `u1`).
fn pod_review(op: &str, object: Option<Value>, old: Value, options: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "a", "namespace": "ns", "operation": op,
            "userInfo": {"username": "tester"},
            "object": object, "oldObject": old, "options": options,
            "dryRun": false
        }
    }))
    .expect("body")
}

/// Through the server's entry point: the delete options' `dryRun` is read from the review.
#[tokio::test]
async fn served_path_reads_the_delete_options() {
    let c = cluster(1, &[]);
    let review = |options: Value| pod_review("DELETE", None, marked("a", true), options);
    let answer = |out: Option<Vec<u8>>| -> Value {
        serde_json::from_slice::<Value>(&out.expect("served")).expect("json")["response"].clone()
    };
    let dry = json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions", "dryRun": ["All"]});
    let out = crate::handle_admission_async("/validate-pod", &review(dry), &c, &gates()).await;
    assert_eq!(answer(out)["allowed"], true);
    assert_eq!(
        c.writes.load(Ordering::SeqCst),
        0,
        "a dry run is not charged"
    );
    let real = json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions"});
    let out =
        crate::handle_admission_async("/validate-pod", &review(real.clone()), &c, &gates()).await;
    assert_eq!(answer(out)["allowed"], true);
    assert_eq!(c.writes.load(Ordering::SeqCst), 1);
    // Budget spent: a second Pod's delete is refused with upstream's 403.
    let mut second = serde_json::from_slice::<Value>(&review(real)).expect("json");
    second["request"]["oldObject"] = marked("b", true);
    let body = serde_json::to_vec(&second).expect("body");
    let r = answer(crate::handle_admission_async("/validate-pod", &body, &c, &gates()).await);
    assert_eq!(r["allowed"], false);
    assert_eq!(r["status"]["code"], 403);
}

#[tokio::test]
async fn v1beta1_evictions_carry_their_dry_run_too() {
    let c = cluster(1, &[marked("a", true)]);
    let body = json!({"apiVersion": "policy/v1beta1", "kind": "Eviction",
        "metadata": {"name": "a", "namespace": "ns"}, "deleteOptions": {"dryRun": ["All"]}});
    let req = request(Operation::Create, Some("eviction"), "a", Some(body), None);
    assert_eq!(validate_pod(req, None, &c, &gates()).await, Outcome::Allow);
    assert_eq!(c.writes.load(Ordering::SeqCst), 0);
}

/// The fast path of `/validate-pod` takes exactly the reviews the whole path admits without a
/// budget or a WorkloadSpread: an UPDATE or a DELETE of a Pod that names one is still judged
/// (and refused here, the budget spent).
#[tokio::test]
async fn updates_and_deletes_without_a_budget_are_admitted_unread_and_the_others_judged() {
    let on = gates().with(Gate::PodUnavailableBudgetUpdateGate, true);
    let spent = cluster(0, &[]);
    let review = |op: &str, old: Value, new: Option<Value>| {
        let mut new = new;
        if let Some(n) = new.as_mut() {
            n["spec"]["containers"][0]["image"] = json!("nginx:2");
        }
        pod_review(op, new, old, Value::Null)
    };
    let served = async |body: &[u8]| -> Value {
        let out = crate::handle_admission_async("/validate-pod", body, &spent, &on).await;
        serde_json::from_slice::<Value>(&out.expect("served")).expect("json")["response"].clone()
    };
    for annotations in [
        json!({}),
        json!({keys::PUB_RELATED_ANNOTATION: ""}),
        json!(null),
    ] {
        let pod = pod_json("a", true, annotations.clone());
        let body = review("UPDATE", pod.clone(), Some(pod.clone()));
        assert_eq!(
            super::admitted_unread(&body).as_deref(),
            Some("u1"),
            "{annotations}"
        );
        let r = served(&body).await;
        assert_eq!(
            (r["allowed"].clone(), r["uid"].clone()),
            (json!(true), json!("u1"))
        );
        // The whole path agrees.
        let req = request(Operation::Update, None, "a", Some(pod.clone()), Some(pod));
        assert_eq!(validate_pod(req, None, &spent, &on).await, Outcome::Allow);
    }
    let body = review("UPDATE", marked("a", true), Some(marked("a", true)));
    assert_eq!(super::admitted_unread(&body), None);
    let r = served(&body).await;
    assert_eq!(
        (r["allowed"].clone(), r["status"]["code"].clone()),
        (json!(false), json!(403))
    );
    let plain = pod_json("a", true, json!({}));
    // A delete, the controller's or the kubelet's, of a Pod that names neither.
    let body = pod_review("DELETE", None, plain.clone(), Value::Null);
    assert_eq!(super::admitted_unread(&body).as_deref(), Some("u1"));
    let r = served(&body).await;
    assert_eq!(
        (r["allowed"].clone(), r["uid"].clone()),
        (json!(true), json!("u1"))
    );
    let req = request(Operation::Delete, None, "a", None, Some(plain.clone()));
    assert_eq!(validate_pod(req, None, &spent, &on).await, Outcome::Allow);
    // A delete of a Pod that names a budget is judged: refused, the budget being spent.
    let body = pod_review("DELETE", None, marked("a", true), Value::Null);
    assert_eq!(super::admitted_unread(&body), None);
    let r = served(&body).await;
    assert_eq!(
        (r["allowed"].clone(), r["status"]["code"].clone()),
        (json!(false), json!(403))
    );
    // One that names a WorkloadSpread goes the whole way too (its subset records the delete).
    let spread = pod_json(
        "a",
        true,
        json!({keys::MATCHED_WORKLOADSPREAD_ANNOTATION: r#"{"Name":"ws","Subset":"a"}"#}),
    );
    let mut sub =
        serde_json::from_slice::<Value>(&pod_review("DELETE", None, plain.clone(), Value::Null))
            .expect("json");
    sub["request"]["subResource"] = json!("status");
    for body in [
        pod_review("DELETE", None, spread, Value::Null),
        serde_json::to_vec(&sub).expect("body"),
        pod_review("CREATE", Some(plain.clone()), Value::Null, Value::Null),
        review("UPDATE", plain.clone(), None),
        b"not json".to_vec(),
    ] {
        assert_eq!(super::admitted_unread(&body), None);
    }
    assert_eq!(spent.writes.load(Ordering::SeqCst), 0);
}
