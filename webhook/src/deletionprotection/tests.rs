use serde_json::{Value, json};

use super::*;
use crate::paths;
use crate::review::tests::{response, review_body};

const LABEL: &str = "policy.kruise.io/delete-protection";

fn on() -> FeatureGates {
    FeatureGates::default().with(Gate::ResourcesDeletionProtection, true)
}

fn crd_on() -> FeatureGates {
    on().with(Gate::DeletionProtectionForCRDCascadingGate, true)
}

fn workload(replicas: Option<i64>) -> Target {
    Target::Workload {
        kind: "Deployment".into(),
        replicas,
    }
}

fn ns() -> Target {
    Target::Namespace {
        name: "team".into(),
    }
}

fn resource() -> CrdResource {
    CrdResource {
        group: "e2e.example.io".into(),
        version: "v1".into(),
        plural: "widgets".into(),
        kind: "Widget".into(),
    }
}

fn crd() -> Target {
    Target::Crd {
        resource: Some(resource()),
    }
}

fn counts(pods: Option<Count>, pvcs: Option<Count>, objects: Option<Count>) -> Counts {
    Counts {
        active_pods: pods,
        bound_pvcs: pvcs,
        active_objects: objects,
    }
}

fn refusal(d: Decision) -> String {
    match d {
        Decision::Refuse(m) => m,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn every_target() -> Vec<Target> {
    vec![workload(Some(3)), ns(), crd(), Target::AlwaysOnly]
}

#[test]
fn nothing_is_refused_while_the_gate_is_off() {
    let all = counts(Some(Ok(5)), Some(Ok(5)), Some(Ok(5)));
    for t in every_target() {
        for label in ["Always", "Cascading"] {
            let off =
                FeatureGates::default().with(Gate::DeletionProtectionForCRDCascadingGate, true);
            assert_eq!(
                decide(&t, Some(label), false, &off, &all),
                Decision::Allow,
                "{t:?} {label}"
            );
        }
    }
}

#[test]
fn an_object_already_being_deleted_is_let_through() {
    for t in every_target() {
        assert_eq!(
            decide(&t, Some("Always"), true, &crd_on(), &Counts::default()),
            Decision::Allow,
            "{t:?}"
        );
    }
}

#[test]
fn always_refuses_every_kind_naming_the_label_and_the_fix() {
    for t in every_target() {
        let m = refusal(decide(&t, Some("Always"), false, &on(), &Counts::default()));
        assert_eq!(
            m,
            format!(
                "forbidden by ResourcesProtectionDeletion for {LABEL}=Always; to delete it, \
                 first remove the label {LABEL}"
            ),
            "{t:?}"
        );
    }
}

#[test]
fn other_values_and_no_label_protect_nothing() {
    let all = counts(Some(Ok(5)), Some(Ok(5)), Some(Ok(5)));
    for t in every_target() {
        for label in [
            None,
            Some(""),
            Some("always"),
            Some("cascading"),
            Some("Never"),
            Some("true"),
        ] {
            assert_eq!(
                decide(&t, label, false, &crd_on(), &all),
                Decision::Allow,
                "{t:?} {label:?}"
            );
        }
    }
}

#[test]
fn cascading_workload_is_refused_while_replicas_are_above_zero() {
    let m = refusal(decide(
        &workload(Some(3)),
        Some("Cascading"),
        false,
        &on(),
        &Counts::default(),
    ));
    assert_eq!(
        m,
        format!(
            "forbidden by ResourcesProtectionDeletion for {LABEL}=Cascading and replicas 3>0; \
             to delete the Deployment, first scale spec.replicas to 0 or remove the label {LABEL}"
        )
    );
    for replicas in [Some(0), None] {
        assert_eq!(
            decide(
                &workload(replicas),
                Some("Cascading"),
                false,
                &on(),
                &Counts::default()
            ),
            Decision::Allow,
            "{replicas:?}"
        );
    }
}

#[test]
fn cascading_service_and_ingress_are_ignored_as_upstream() {
    assert_eq!(
        decide(
            &Target::AlwaysOnly,
            Some("Cascading"),
            false,
            &on(),
            &Counts::default()
        ),
        Decision::Allow
    );
}

#[test]
fn cascading_namespace_counts_pods_first_then_pvcs() {
    let d = |c: Counts| decide(&ns(), Some("Cascading"), false, &on(), &c);
    assert_eq!(
        d(Counts::default()),
        Decision::Need(Lookup::ActivePods("team".into()))
    );
    let m = refusal(d(counts(Some(Ok(2)), None, None)));
    assert_eq!(
        m,
        format!(
            "forbidden by ResourcesProtectionDeletion for {LABEL}=Cascading and active pods 2>0; \
             to delete namespace team, first delete its Pods (or scale their workloads to 0) or \
             remove the label {LABEL}"
        )
    );
    assert_eq!(
        d(counts(Some(Ok(0)), None, None)),
        Decision::Need(Lookup::BoundPvcs("team".into()))
    );
    let m = refusal(d(counts(Some(Ok(0)), Some(Ok(1)), None)));
    assert_eq!(
        m,
        format!(
            "forbidden by ResourcesProtectionDeletion for {LABEL}=Cascading and \"Bound\" status \
             pvc 1>0; to delete namespace team, first delete its Bound PersistentVolumeClaims or \
             remove the label {LABEL}"
        )
    );
    assert_eq!(d(counts(Some(Ok(0)), Some(Ok(0)), None)), Decision::Allow);
}

#[test]
fn a_count_that_cannot_be_read_refuses() {
    let m = refusal(decide(
        &ns(),
        Some("Cascading"),
        false,
        &on(),
        &counts(Some(Err("boom".into())), None, None),
    ));
    assert!(
        m.starts_with("forbidden by ResourcesProtectionDeletion for list pods error: boom; "),
        "{m}"
    );
    assert!(m.contains(&format!("remove the label {LABEL}")), "{m}");
    let m = refusal(decide(
        &ns(),
        Some("Cascading"),
        false,
        &on(),
        &counts(Some(Ok(0)), Some(Err("boom".into())), None),
    ));
    assert!(
        m.starts_with("forbidden by ResourcesProtectionDeletion for list pvc error: boom; "),
        "{m}"
    );
    let m = refusal(decide(
        &crd(),
        Some("Cascading"),
        false,
        &crd_on(),
        &counts(None, None, Some(Err("forbidden".into()))),
    ));
    assert!(
        m.starts_with("failed to list CRs of e2e.example.io/v1, Kind=WidgetList: forbidden; "),
        "{m}"
    );
    let m = refusal(decide(
        &Target::Crd { resource: None },
        Some("Cascading"),
        false,
        &crd_on(),
        &Counts::default(),
    ));
    assert!(m.contains("no storage version"), "{m}");
}

#[test]
fn cascading_crd_without_its_gate_is_refused_as_upstream() {
    let m = refusal(decide(
        &crd(),
        Some("Cascading"),
        false,
        &on(),
        &Counts::default(),
    ));
    assert_eq!(
        m,
        format!(
            "feature-gate DeletionProtectionForCRDCascadingGate is not enabled; the CRD is \
             labelled {LABEL}=Cascading, which needs it: to delete the CRD, first remove the \
             label {LABEL} or turn the gate on"
        )
    );
}

#[test]
fn cascading_crd_counts_its_objects_with_the_gate() {
    let d = |c: Counts| decide(&crd(), Some("Cascading"), false, &crd_on(), &c);
    assert_eq!(
        d(Counts::default()),
        Decision::Need(Lookup::ActiveObjects(resource()))
    );
    let m = refusal(d(counts(None, None, Some(Ok(1)))));
    assert_eq!(
        m,
        format!(
            "forbidden by ResourcesProtectionDeletion for {LABEL}=Cascading and active CRs 1>0; \
             to delete the CRD, first delete its objects (kubectl get widgets.e2e.example.io -A) \
             or remove the label {LABEL}"
        )
    );
    assert_eq!(d(counts(None, None, Some(Ok(0)))), Decision::Allow);
}

/// A cluster with fixed counts, recording what it was asked.
#[derive(Default)]
struct Fixed {
    pods: u64,
    pvcs: u64,
    objects: u64,
    asked: std::sync::Mutex<Vec<String>>,
    refusals: std::sync::Mutex<Vec<String>>,
}

impl Fixed {
    fn ask(&self, what: String) {
        if let Ok(mut a) = self.asked.lock() {
            a.push(what);
        }
    }
    fn asked(&self) -> Vec<String> {
        self.asked.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

impl ProtectionLookup for Fixed {
    async fn active_pods(&self, namespace: &str) -> Count {
        self.ask(format!("pods {namespace}"));
        Ok(self.pods)
    }
    async fn bound_pvcs(&self, namespace: &str) -> Count {
        self.ask(format!("pvcs {namespace}"));
        Ok(self.pvcs)
    }
    async fn active_objects(&self, r: &CrdResource) -> Count {
        self.ask(format!("{}.{}/{}", r.plural, r.group, r.version));
        Ok(self.objects)
    }
    fn refused(&self, what: crate::metrics::Protected<'_>, username: &str) {
        if let Ok(mut r) = self.refusals.lock() {
            r.push(format!("{what:?} by {username}"));
        }
    }
}

fn serve(path: &str, body: &[u8], cluster: &Fixed, gates: &FeatureGates) -> Option<Value> {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(handler::admit(path, body, cluster, gates))
        .map(|out| response(&out))
}

fn delete(gvk: (&str, &str, &str), resource: &str, old: Option<Value>) -> Vec<u8> {
    review_body("DELETE", gvk, resource, None, old)
}

fn labelled(value: &str, rest: Value) -> Value {
    let mut o = rest;
    o["metadata"]["labels"] = json!({ LABEL: value });
    o
}

#[test]
fn namespace_handler_reads_counts_lazily() {
    let body = delete(
        ("", "v1", "Namespace"),
        "namespaces",
        Some(labelled("Cascading", json!({"metadata": {"name": "team"}}))),
    );
    let busy = Fixed {
        pods: 1,
        ..Default::default()
    };
    let r = serve(paths::VALIDATE_NAMESPACE, &body, &busy, &on()).expect("served");
    assert_eq!(r["allowed"], false);
    assert_eq!(r["status"]["code"], 403);
    assert!(
        r["status"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("active pods 1>0"),
        "{r}"
    );
    assert_eq!(
        busy.asked(),
        vec!["pods team"],
        "PVCs are not listed while Pods remain"
    );
    assert_eq!(
        *busy.refusals.lock().expect("lock"),
        [r#"Namespace("team") by tester"#],
        "the refusal is counted under the namespace and the requester"
    );
    let empty = Fixed::default();
    let r = serve(paths::VALIDATE_NAMESPACE, &body, &empty, &on()).expect("served");
    assert_eq!(r["allowed"], true, "{r}");
    assert_eq!(empty.asked(), vec!["pods team", "pvcs team"]);
    assert!(empty.refusals.lock().expect("lock").is_empty());
}

#[test]
fn crd_handler_lists_the_storage_version() {
    let crd = labelled(
        "Cascading",
        json!({"metadata": {"name": "widgets.e2e.example.io"}, "spec": {
            "group": "e2e.example.io",
            "names": {"plural": "widgets", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1alpha1", "storage": false}, {"name": "v1", "storage": true}]
        }}),
    );
    let body = delete(
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
        Some(crd),
    );
    let one = Fixed {
        objects: 1,
        ..Default::default()
    };
    let r = serve(paths::VALIDATE_CRD, &body, &one, &crd_on()).expect("served");
    assert_eq!(r["status"]["code"], 403, "{r}");
    assert_eq!(one.asked(), vec!["widgets.e2e.example.io/v1"]);
    let r = serve(paths::VALIDATE_CRD, &body, &Fixed::default(), &crd_on()).expect("served");
    assert_eq!(r["allowed"], true, "{r}");
}

fn workload_delete(
    group: &str,
    version: &str,
    kind: &str,
    resource: &str,
    label: &str,
    replicas: i64,
) -> Vec<u8> {
    delete(
        (group, version, kind),
        resource,
        Some(labelled(
            label,
            json!({"metadata": {"name": "w"}, "spec": {"replicas": replicas}}),
        )),
    )
}

#[test]
fn every_protected_workload_path_refuses_cascading_with_replicas() {
    let cases = [
        (
            paths::VALIDATE_APPS_DEPLOYMENT,
            "apps",
            "v1",
            "Deployment",
            "deployments",
        ),
        (
            paths::VALIDATE_APPS_REPLICASET,
            "apps",
            "v1",
            "ReplicaSet",
            "replicasets",
        ),
        (
            paths::VALIDATE_APPS_STATEFULSET,
            "apps",
            "v1",
            "StatefulSet",
            "statefulsets",
        ),
        (
            paths::VALIDATE_CLONESET,
            "apps.kruise.io",
            "v1beta1",
            "CloneSet",
            "clonesets",
        ),
        (
            paths::VALIDATE_CLONESET,
            "apps.kruise.io",
            "v1alpha1",
            "CloneSet",
            "clonesets",
        ),
        (
            paths::VALIDATE_CLONESET_V1ALPHA1,
            "apps.kruise.io",
            "v1alpha1",
            "CloneSet",
            "clonesets",
        ),
        (
            paths::VALIDATE_CLONESET_V1BETA1,
            "apps.kruise.io",
            "v1beta1",
            "CloneSet",
            "clonesets",
        ),
        (
            paths::VALIDATE_STATEFULSET,
            "apps.kruise.io",
            "v1beta1",
            "StatefulSet",
            "statefulsets",
        ),
        (
            paths::VALIDATE_STATEFULSET,
            "apps.kruise.io",
            "v1alpha1",
            "StatefulSet",
            "statefulsets",
        ),
    ];
    let cluster = Fixed::default();
    for (path, group, version, kind, resource) in cases {
        let body = workload_delete(group, version, kind, resource, "Cascading", 2);
        let r = serve(path, &body, &cluster, &on()).expect(path);
        assert_eq!(r["allowed"], false, "{path} {kind} {version}");
        assert_eq!(r["status"]["code"], 403);
        let m = r["status"]["message"].as_str().unwrap_or("");
        assert!(
            m.contains("replicas 2>0") && m.contains(&format!("delete the {kind}")),
            "{m}"
        );
        let zero = workload_delete(group, version, kind, resource, "Cascading", 0);
        assert_eq!(
            serve(path, &zero, &cluster, &on()).expect(path)["allowed"],
            true,
            "{path}"
        );
        // Gate off: upstream's default lets it through.
        assert_eq!(
            serve(path, &body, &cluster, &FeatureGates::default()).expect(path)["allowed"],
            true,
            "{path}"
        );
    }
    assert!(cluster.asked().is_empty(), "workloads need no lookup");
}

#[test]
fn service_and_ingress_honour_always_only() {
    for (path, gvk, resource) in [
        (paths::VALIDATE_SERVICE, ("", "v1", "Service"), "services"),
        (
            paths::VALIDATE_INGRESS,
            ("networking.k8s.io", "v1", "Ingress"),
            "ingresses",
        ),
    ] {
        let old = |v: &str| Some(labelled(v, json!({"metadata": {"name": "s"}})));
        let r = serve(
            path,
            &delete(gvk, resource, old("Always")),
            &Fixed::default(),
            &on(),
        )
        .expect(path);
        assert_eq!(r["status"]["code"], 403, "{r}");
        let r = serve(
            path,
            &delete(gvk, resource, old("Cascading")),
            &Fixed::default(),
            &on(),
        )
        .expect(path);
        assert_eq!(r["allowed"], true, "{path}: {r}");
    }
}

#[test]
fn requests_it_does_not_judge_are_admitted_or_left_to_the_kind() {
    let cluster = Fixed::default();
    let always = labelled(
        "Always",
        json!({"metadata": {"name": "w"}, "spec": {"replicas": 1}}),
    );
    // No oldObject (API servers before 1.16): let through, as upstream.
    let r = serve(
        paths::VALIDATE_APPS_DEPLOYMENT,
        &delete(("apps", "v1", "Deployment"), "deployments", None),
        &cluster,
        &on(),
    )
    .expect("served");
    assert_eq!(r["allowed"], true);
    // A subresource, or a kind upstream does not protect.
    let mut sub: Value = serde_json::from_slice(&delete(
        ("apps", "v1", "Deployment"),
        "deployments",
        Some(always.clone()),
    ))
    .expect("json");
    sub["request"]["subResource"] = json!("status");
    let sub = serde_json::to_vec(&sub).expect("json");
    assert_eq!(
        serve(paths::VALIDATE_APPS_DEPLOYMENT, &sub, &cluster, &on()).expect("served")["allowed"],
        true
    );
    let r = serve(
        paths::VALIDATE_APPS_DEPLOYMENT,
        &delete(
            ("apps", "v1", "DaemonSet"),
            "daemonsets",
            Some(always.clone()),
        ),
        &cluster,
        &on(),
    )
    .expect("served");
    assert_eq!(r["allowed"], true);
    // On a Kruise workload's path only DELETE is ours; CREATE and UPDATE go to the kind.
    let create = review_body(
        "CREATE",
        ("apps.kruise.io", "v1beta1", "CloneSet"),
        "clonesets",
        Some(always.clone()),
        None,
    );
    assert!(serve(paths::VALIDATE_CLONESET, &create, &cluster, &on()).is_none());
    assert!(serve(paths::VALIDATE_IMAGEPULLJOB, &create, &cluster, &on()).is_none());
    // Our Advanced DaemonSet keeps the label too (`Always`; it has no replicas).
    let ds = delete(
        ("apps.kruise.io", "v1beta1", "DaemonSet"),
        "daemonsets",
        Some(labelled("Always", json!({"metadata": {"name": "d"}}))),
    );
    assert_eq!(
        serve(paths::VALIDATE_DAEMONSET, &ds, &cluster, &on()).expect("served")["status"]["code"],
        403
    );
}

#[test]
fn the_server_answers_deletes_of_kruise_workloads_here() {
    let body = workload_delete(
        "apps.kruise.io",
        "v1beta1",
        "CloneSet",
        "clonesets",
        "Always",
        0,
    );
    let run = |gates: FeatureGates| {
        let out = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(crate::handle_admission_async(
                paths::VALIDATE_CLONESET,
                &body,
                &crate::crr::tests::StaticPods(vec![]),
                &gates,
            ))
            .expect("served");
        response(&out)
    };
    let r = run(on());
    assert_eq!(r["status"]["code"], 403, "{r}");
    assert!(
        r["status"]["message"]
            .as_str()
            .unwrap_or("")
            .contains(LABEL),
        "{r}"
    );
    assert_eq!(run(FeatureGates::default())["allowed"], true);
}

#[test]
fn registered_as_upstream_with_service_and_ingress_only_under_the_gate() {
    use crate::WebhookConfig;
    use crate::configuration::validating::validating_configuration;
    let hooks = |gates: FeatureGates| {
        let cfg = WebhookConfig {
            feature_gates: gates,
            ..Default::default()
        };
        validating_configuration(&cfg, "CA")
            .webhooks
            .unwrap_or_default()
    };
    let summary = |h: &k8s_openapi::api::admissionregistration::v1::ValidatingWebhook| {
        let r = &h.rules.as_ref().expect("rules")[0];
        (
            h.client_config
                .service
                .as_ref()
                .and_then(|s| s.path.clone())
                .unwrap_or_default(),
            r.api_groups.clone().unwrap_or_default().join(","),
            r.api_versions.clone().unwrap_or_default().join(","),
            r.operations.clone().unwrap_or_default().join(","),
            r.resources.clone().unwrap_or_default().join(","),
            h.failure_policy.clone().unwrap_or_default(),
        )
    };
    let with = hooks(on());
    let find = |name: &str| {
        with.iter()
            .find(|h| h.name == name)
            .map(summary)
            .unwrap_or_else(|| panic!("{name} registered"))
    };
    let s = |x: &str| x.to_owned();
    assert_eq!(
        find("vnamespace.kb.io"),
        (
            s("/validate-namespace"),
            s(""),
            s("v1"),
            s("DELETE"),
            s("namespaces"),
            s("Fail")
        )
    );
    assert_eq!(
        find("vcustomresourcedefinition.kb.io"),
        (
            s("/validate-customresourcedefinition"),
            s("apiextensions.k8s.io"),
            s("v1,v1beta1"),
            s("DELETE"),
            s("customresourcedefinitions"),
            s("Fail")
        )
    );
    for (name, path, resource) in [
        (
            "vbuiltindeployment.kb.io",
            "/validate-apps-deployment",
            "deployments",
        ),
        (
            "vbuiltinreplicaset.kb.io",
            "/validate-apps-replicaset",
            "replicasets",
        ),
        (
            "vbuiltinstatefulset.kb.io",
            "/validate-apps-statefulset",
            "statefulsets",
        ),
    ] {
        assert_eq!(
            find(name),
            (
                s(path),
                s("apps"),
                s("v1"),
                s("DELETE"),
                s(resource),
                s("Fail")
            )
        );
    }
    assert_eq!(
        find("vservice.kb.io"),
        (
            s("/validate-service"),
            s(""),
            s("v1"),
            s("DELETE"),
            s("services"),
            s("Fail")
        )
    );
    assert_eq!(
        find("vingress.kb.io"),
        (
            s("/validate-ingress"),
            s("networking.k8s.io"),
            s("v1,v1beta1"),
            s("DELETE"),
            s("ingresses"),
            s("Fail")
        )
    );
    // Only labelled objects are sent to us (a manager that is down blocks nothing else).
    let delete_only: Vec<_> = with
        .iter()
        .filter(|h| {
            h.rules.as_ref().expect("rules")[0].operations == Some(vec!["DELETE".to_owned()])
        })
        .collect();
    assert_eq!(delete_only.len(), 7, "upstream's seven DELETE-only hooks");
    for h in delete_only {
        let sel = h.object_selector.clone().expect("objectSelector");
        let req = &sel.match_expressions.expect("expressions")[0];
        assert_eq!(
            (req.key.as_str(), req.operator.as_str()),
            (LABEL, "Exists"),
            "{}",
            h.name
        );
    }
    assert_eq!(find("vstatefulset.kb.io").3, "CREATE,UPDATE,DELETE");
    assert_eq!(find("vcloneset.kb.io").3, "CREATE,UPDATE,DELETE");
    let without: Vec<String> = hooks(FeatureGates::default())
        .into_iter()
        .map(|h| h.name)
        .collect();
    assert!(without.contains(&s("vnamespace.kb.io")), "{without:?}");
    assert!(
        !without
            .iter()
            .any(|n| n == "vservice.kb.io" || n == "vingress.kb.io"),
        "{without:?}"
    );
    assert_eq!(without.len() + 2, with.len());
}
