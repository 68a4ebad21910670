//! The Pod-template and PVC defaults every workload kind applies (CloneSet, Advanced
//! StatefulSet, Advanced DaemonSet), as the API server defaults a Pod and a PVC.

use serde_json::{Map, Value, json};

use crate::json::{default_field, default_string, get, get_mut};
use crate::review::Request;
use kruise_api::features::{FeatureGates, Gate};
use kube::core::admission::Operation;

/// Whether a workload's Pod template gets its defaults under `gates`: never while
/// `TemplateNoDefaults` is on (upstream's CloneSet, Advanced StatefulSet, BroadcastJob,
/// AdvancedCronJob and UnitedDeployment handlers; Advanced DaemonSet ignores the gate), else
/// [`template_defaults_due`].
pub fn template_defaults_wanted(req: &Request, obj: &Value, gates: &FeatureGates) -> bool {
    !gates.enabled(Gate::TemplateNoDefaults) && template_defaults_due(req, obj)
}

/// Whether a workload's Pod template gets its defaults: on CREATE, and on an UPDATE that
/// changes `spec.template`, so that an unrelated update never changes the template (and so the
/// revision) behind the user's back.
pub fn template_defaults_due(req: &Request, obj: &Value) -> bool {
    match req.operation {
        Operation::Update => {
            let old = req
                .old_object
                .as_ref()
                .and_then(|o| get(o, &["spec", "template"]));
            old != get(obj, &["spec", "template"])
        }
        _ => true,
    }
}

/// A volumeClaimTemplate as the API server defaults a PVC (shared with Advanced StatefulSet).
pub fn default_pvc(pvc: &mut Map<String, Value>) {
    if let Some(Value::Object(spec)) = pvc.get_mut("spec") {
        default_string(spec, "volumeMode", "Filesystem");
    }
    // Upstream runs the API's PVC defaulting, which sets status.phase too.
    if let Some(status) = pvc
        .entry("status")
        .or_insert_with(|| json!({}))
        .as_object_mut()
    {
        default_string(status, "phase", "Pending");
    }
}

/// The pod-template defaults the API server would apply to a Pod, plus Kruise's own: containers
/// default to `imagePullPolicy: Always` so that an in-place image update always pulls. Not
/// `enableServiceLinks`: the API server defaults it on Pods only, never in templates, and
/// upstream's template defaulting does the same; setting it would give an Advanced StatefulSet
/// another revision hash than the StatefulSet whose Pods it adopts.
pub fn default_pod_spec(spec: &mut Map<String, Value>) {
    default_string(spec, "dnsPolicy", "ClusterFirst");
    default_string(spec, "restartPolicy", "Always");
    default_field(spec, "terminationGracePeriodSeconds", json!(30));
    default_field(spec, "securityContext", json!({}));
    default_string(spec, "schedulerName", "default-scheduler");
    if let Some(Value::Array(vols)) = spec.get_mut("volumes") {
        for v in vols.iter_mut().filter_map(Value::as_object_mut) {
            default_volume(v);
        }
    }
    for (key, is_app) in [("initContainers", false), ("containers", true)] {
        if let Some(Value::Array(cs)) = spec.get_mut(key) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                default_container(c, is_app);
            }
        }
    }
    if let Some(Value::Array(cs)) = spec.get_mut("ephemeralContainers") {
        for c in cs.iter_mut().filter_map(Value::as_object_mut) {
            default_ports_env_probes(c);
        }
    }
}

fn default_volume(v: &mut Map<String, Value>) {
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(Value::Object(s)) = v.get_mut(source) {
            default_field(s, "defaultMode", json!(420));
        }
    }
    if let Some(Value::Object(h)) = v.get_mut("hostPath") {
        default_field(h, "type", json!(""));
    }
}

fn default_container(c: &mut Map<String, Value>, is_app: bool) {
    let policy = if is_app {
        "Always"
    } else {
        pull_policy_for(c.get("image").and_then(Value::as_str).unwrap_or_default())
    };
    default_string(c, "imagePullPolicy", policy);
    default_string(c, "terminationMessagePath", "/dev/termination-log");
    default_string(c, "terminationMessagePolicy", "File");
    default_ports_env_probes(c);
}

/// The API's rule: `:latest` or no tag pulls always, anything else if not present.
pub fn pull_policy_for(image: &str) -> &'static str {
    let without_digest = image.split('@').next().unwrap_or_default();
    let last = without_digest.rsplit('/').next().unwrap_or_default();
    match last.split_once(':') {
        _ if image.contains('@') => "IfNotPresent",
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn default_ports_env_probes(c: &mut Map<String, Value>) {
    if let Some(Value::Array(ports)) = c.get_mut("ports") {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            default_string(p, "protocol", "TCP");
        }
    }
    if let Some(Value::Array(env)) = c.get_mut("env") {
        for e in env.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(Value::Object(fr)) = get_mut(e, &["valueFrom", "fieldRef"]) {
                default_string(fr, "apiVersion", "v1");
            }
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(Value::Object(p)) = c.get_mut(probe) {
            default_field(p, "timeoutSeconds", json!(1));
            default_field(p, "periodSeconds", json!(10));
            default_field(p, "successThreshold", json!(1));
            default_field(p, "failureThreshold", json!(3));
            if let Some(Value::Object(h)) = p.get_mut("httpGet") {
                default_http_get(h);
            }
        }
    }
    for hook in ["postStart", "preStop"] {
        if let Some(Value::Object(h)) = c
            .get_mut("lifecycle")
            .and_then(Value::as_object_mut)
            .and_then(|l| l.get_mut(hook))
            .and_then(Value::as_object_mut)
            .and_then(|h| h.get_mut("httpGet"))
        {
            default_http_get(h);
        }
    }
}

fn default_http_get(h: &mut Map<String, Value>) {
    default_string(h, "path", "/");
    default_string(h, "scheme", "HTTP");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A template gets the API server's Pod defaults except `enableServiceLinks` (Pods only), so
    /// it records what a StatefulSet's template records.
    #[test]
    fn templates_get_pod_defaults_but_not_enable_service_links() {
        let mut spec = json!({"containers": [{"name": "app", "image": "a:1"}]});
        let Value::Object(m) = &mut spec else {
            unreachable!()
        };
        default_pod_spec(m);
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["containers"][0]["imagePullPolicy"], "Always");
        assert!(spec.get("enableServiceLinks").is_none(), "{spec}");
    }

    /// Template defaults on every CREATE and on an UPDATE that changes the template only.
    #[test]
    fn template_defaults_are_due_on_create_and_on_a_template_change() {
        let obj = |image: &str| json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "app", "image": image}]}}}});
        let req = |operation, old: Option<Value>| Request {
            uid: String::new(),
            operation,
            group: String::new(),
            version: String::new(),
            kind: String::new(),
            resource: String::new(),
            sub_resource: None,
            namespace: None,
            name: String::new(),
            object: Some(obj("a:2")),
            old_object: old,
            options: None,
            dry_run: false,
            username: String::new(),
        };
        assert!(template_defaults_due(
            &req(Operation::Create, None),
            &obj("a:2")
        ));
        assert!(template_defaults_due(
            &req(Operation::Update, Some(obj("a:1"))),
            &obj("a:2")
        ));
        let mut scaled = obj("a:2");
        scaled["spec"]["replicas"] = json!(3);
        assert!(!template_defaults_due(
            &req(Operation::Update, Some(obj("a:2"))),
            &scaled
        ));
    }

    /// `TemplateNoDefaults`: the five kinds whose upstream handler reads the gate leave their
    /// Pod template as sent (their other defaults still apply); Advanced DaemonSet, whose
    /// handler does not read it, still defaults its template.
    #[test]
    fn template_no_defaults_skips_the_template_of_the_five_kinds() {
        use crate::paths::{self, Handler};
        use crate::review::tests::{response, review_body};
        use kruise_api::features::{FeatureGates, Gate};
        let pod = json!({"containers": [{"name": "app", "image": "nginx"}]});
        let tpl = json!({"spec": pod});
        let cases = [
            (
                paths::MUTATE_CLONESET,
                "v1alpha1",
                "CloneSet",
                json!({"template": tpl}),
                &["spec", "template", "spec"][..],
                true,
            ),
            (
                paths::MUTATE_STATEFULSET,
                "v1beta1",
                "StatefulSet",
                json!({"template": tpl}),
                &["spec", "template", "spec"][..],
                true,
            ),
            (
                paths::MUTATE_BROADCASTJOB,
                "v1alpha1",
                "BroadcastJob",
                json!({"template": tpl}),
                &["spec", "template", "spec"][..],
                true,
            ),
            (
                paths::MUTATE_ADVANCEDCRONJOB,
                "v1alpha1",
                "AdvancedCronJob",
                json!({"schedule": "* * * * *", "template": {"jobTemplate": {"spec": {"template": tpl}}}}),
                &[
                    "spec",
                    "template",
                    "jobTemplate",
                    "spec",
                    "template",
                    "spec",
                ][..],
                true,
            ),
            (
                paths::MUTATE_UNITEDDEPLOYMENT,
                "v1alpha1",
                "UnitedDeployment",
                json!({"template": {"statefulSetTemplate": {"spec": {"template": tpl}}}}),
                &[
                    "spec",
                    "template",
                    "statefulSetTemplate",
                    "spec",
                    "template",
                    "spec",
                ][..],
                true,
            ),
            (
                paths::MUTATE_DAEMONSET,
                "v1alpha1",
                "DaemonSet",
                json!({"template": tpl}),
                &["spec", "template", "spec"][..],
                false,
            ),
        ];
        for (path, version, kind, spec, at, gated) in cases {
            let obj = json!({"apiVersion": format!("apps.kruise.io/{version}"), "kind": kind,
                "metadata": {"name": "w", "namespace": "default"}, "spec": spec});
            let body = review_body(
                "CREATE",
                ("apps.kruise.io", version, kind),
                "x",
                Some(obj.clone()),
                None,
            );
            let handler = paths::hook(path).expect("hook").handler;
            for on in [false, true] {
                let gates = FeatureGates::default().with(Gate::TemplateNoDefaults, on);
                let out = match handler {
                    Handler::Gated(h) => crate::review::admit(&body, |r| h(r, &gates)),
                    Handler::Pure(h) => crate::review::admit(&body, h),
                    Handler::Cluster(_) => panic!("{path} reads the cluster"),
                };
                let resp = response(&out);
                assert_eq!(resp["allowed"], true, "{path}: {resp}");
                let patch: json_patch::Patch = serde_json::from_value(resp["patch"].clone())
                    .ok()
                    .or_else(|| {
                        let bytes: Vec<u8> = resp["patch"]
                            .as_array()?
                            .iter()
                            .filter_map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                            .collect();
                        serde_json::from_slice(&bytes).ok()
                    })
                    .unwrap_or_default();
                let mut after = obj.clone();
                json_patch::patch(&mut after, &patch).expect("patch applies");
                let pod_spec = get(&after, at).expect("template kept");
                let skipped = on && gated;
                assert_eq!(pod_spec == &pod, skipped, "{path} gate {on}: {pod_spec}");
                assert_ne!(after, obj, "{path} gate {on}: other defaults still apply");
            }
        }
    }
}
