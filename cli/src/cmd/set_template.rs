//! `set env` and `set resources`: change the Pod template's containers, saying first whether the
//! Pods will take the change in place. The answer is the in-place engine's own
//! (`kruise_manager::inplace::spec::calculate`, run on the template before and after, with the
//! installed manager's feature gates), so the plugin predicts what the manager will do.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kruise_api::features::FeatureGates;
use kruise_manager::inplace::spec::{Features, UpdateOptions, calculate};
use serde_json::{Map, Value, json};

use crate::ctx::{Ctx, Workload};
use crate::error::{CliError, Result, exit};
use crate::target::Target;
use crate::view::RolloutView;
use crate::view::workload::Kind;

/// What to change in each selected container.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// `KEY=VALUE` sets (or replaces) a variable; `KEY-` removes it (kubectl's forms).
    Env {
        set: Vec<(String, String)>,
        unset: Vec<String>,
    },
    /// `--limits` / `--requests` as `NAME=QUANTITY,…`; a listed resource is set, others kept.
    Resources {
        limits: BTreeMap<String, String>,
        requests: BTreeMap<String, String>,
    },
}

/// Parses `KEY=VALUE` and `KEY-` arguments.
pub fn parse_env(args: &[String]) -> std::result::Result<Edit, String> {
    let mut set = Vec::new();
    let mut unset = Vec::new();
    for a in args {
        if let Some((k, v)) = a.split_once('=') {
            if k.is_empty() {
                return Err(format!("{a:?}: the variable has no name (KEY=VALUE)"));
            }
            set.push((k.to_owned(), v.to_owned()));
        } else if let Some(k) = a.strip_suffix('-').filter(|k| !k.is_empty()) {
            unset.push(k.to_owned());
        } else {
            return Err(format!(
                "{a:?} is neither KEY=VALUE (set) nor KEY- (remove)"
            ));
        }
    }
    if set.is_empty() && unset.is_empty() {
        return Err("nothing to change: give KEY=VALUE or KEY- arguments".to_owned());
    }
    Ok(Edit::Env { set, unset })
}

/// Parses `cpu=200m,memory=512Mi`.
pub fn parse_resource_list(
    flag: &str,
    s: Option<&str>,
) -> std::result::Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for item in s
        .into_iter()
        .flat_map(|s| s.split(','))
        .filter(|i| !i.is_empty())
    {
        let (k, v) = item
            .split_once('=')
            .filter(|(k, v)| !k.is_empty() && !v.is_empty())
            .ok_or_else(|| format!("--{flag} {item:?} is not NAME=QUANTITY (e.g. cpu=200m)"))?;
        out.insert(k.to_owned(), v.to_owned());
    }
    Ok(out)
}

/// The containers after `edit`, for those named in `only` (all when empty), and the names of
/// the containers whose spec changed.
pub fn apply(
    containers: &[Value],
    only: &[String],
    edit: &Edit,
) -> std::result::Result<(Vec<Value>, Vec<String>), String> {
    let names: Vec<&str> = containers
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    if let Some(missing) = only.iter().find(|o| !names.contains(&o.as_str())) {
        return Err(format!(
            "no container {missing:?} in the template (containers: {})",
            names.join(", ")
        ));
    }
    let mut out = containers.to_vec();
    let mut changed = Vec::new();
    for c in &mut out {
        let name = c["name"].as_str().unwrap_or_default().to_owned();
        if !only.is_empty() && !only.contains(&name) {
            continue;
        }
        let before = c.clone();
        match edit {
            Edit::Env { set, unset } => edit_env(c, set, unset),
            Edit::Resources { limits, requests } => {
                edit_resources(c, "limits", limits);
                edit_resources(c, "requests", requests);
            }
        }
        if *c != before {
            changed.push(name);
        }
    }
    Ok((out, changed))
}

fn edit_env(c: &mut Value, set: &[(String, String)], unset: &[String]) {
    let mut env: Vec<Value> = c["env"].as_array().cloned().unwrap_or_default();
    env.retain(|e| !unset.iter().any(|u| e["name"] == u.as_str()));
    for (k, v) in set {
        match env.iter_mut().find(|e| e["name"] == k.as_str()) {
            Some(e) => *e = json!({"name": k, "value": v}),
            None => env.push(json!({"name": k, "value": v})),
        }
    }
    if let Some(obj) = c.as_object_mut() {
        if env.is_empty() {
            obj.remove("env");
        } else {
            obj.insert("env".to_owned(), Value::Array(env));
        }
    }
}

fn edit_resources(c: &mut Value, which: &str, values: &BTreeMap<String, String>) {
    if values.is_empty() {
        return;
    }
    let Some(obj) = c.as_object_mut() else {
        return;
    };
    let resources = obj
        .entry("resources")
        .or_insert_with(|| Value::Object(Map::new()));
    if !resources.is_object() {
        *resources = Value::Object(Map::new());
    }
    let list = &mut resources[which];
    if !list.is_object() {
        *list = Value::Object(Map::new());
    }
    for (k, v) in values {
        list[k] = json!(v);
    }
}

fn revision(name: &str, template: &Value) -> ControllerRevision {
    ControllerRevision {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        data: Some(RawExtension(json!({"spec": {"template": template}}))),
        revision: 0,
    }
}

/// Whether the change from `old` to `new` (Pod templates) goes in place under the workload's
/// policy and `gates`, in one sentence, with the partition and pause notes of `set image`.
pub fn predict(view: &RolloutView, old: &Value, new: &Value, gates: &FeatureGates) -> String {
    let spec = view.kind.spec();
    let how = if view.kind == Kind::SidecarSet {
        "running pods keep their sidecar as it is (SidecarSets upgrade images only); pods \
         created from now on get the change"
            .to_owned()
    } else if !(spec.image_change)(view).contains("IN PLACE") {
        // The kind or its policy replaces Pods for any template change.
        (spec.image_change)(view)
    } else {
        let opts = UpdateOptions {
            features: Features::from_gates(gates),
            ..Default::default()
        };
        let policy = &view.pod_update_policy;
        match calculate(
            Some(&revision("current", old)),
            &revision("new", new),
            "new".to_owned(),
            &opts,
        ) {
            Ok(update) if !update.container_resources.is_empty() => format!(
                "pods will be RESIZED IN PLACE ({policy}: cpu/memory within the same QoS class, \
                 InPlaceWorkloadVerticalScaling on; pods keep name, IP and node)"
            ),
            Ok(_) => format!(
                "pods will be updated IN PLACE ({policy}: containers restart, pods keep name, IP \
                 and node)"
            ),
            Err(why) if policy == "InPlaceOnly" => format!(
                "REFUSED: podUpdatePolicy InPlaceOnly cannot apply it ({why}); the webhook \
                 will refuse the change"
            ),
            Err(why) => format!("pods will be RECREATED ({why}; {policy} falls back to recreate)"),
        }
    };
    super::set_image::with_notes(view, how)
}

/// The gates the installed manager runs with; upstream's defaults when none is installed (dev
/// mode, or another namespace), said on stderr.
async fn installed_gates(ctx: &Ctx) -> FeatureGates {
    match crate::dev::cluster::installed(&ctx.client).await {
        Ok(Some(i)) => match FeatureGates::parse(i.feature_gates.as_deref().unwrap_or_default()) {
            Ok(g) => g,
            Err(e) => {
                eprintln!(
                    "note: the manager's --feature-gates cannot be read ({e}); predicting with OpenKruise's defaults"
                );
                FeatureGates::default()
            }
        },
        _ => {
            eprintln!(
                "note: no installed manager found; predicting with OpenKruise's default feature gates"
            );
            FeatureGates::default()
        }
    }
}

/// `set env` / `set resources`.
pub async fn run(
    ctx: &Ctx,
    target: &Target,
    only: &[String],
    edit: &Edit,
    dry_run: bool,
) -> Result<i32> {
    let wl = Workload::locate(ctx, target).await?;
    let obj = wl.fetch_raw().await?;
    let view = RolloutView::from_json(&obj);
    let at = target.kind.spec().containers_path;
    let containers: Vec<Value> = obj
        .pointer(at)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let (new_containers, changed) = apply(&containers, only, edit).map_err(CliError::Usage)?;
    if changed.is_empty() {
        println!("{target}: no container changes: nothing will roll out");
        return Ok(exit::OK);
    }
    println!("{target}: containers changed: {}", changed.join(", "));
    let template_of = |cs: &[Value]| {
        let mut t = obj.pointer("/spec/template").cloned().unwrap_or(json!({}));
        t["spec"]["containers"] = Value::Array(cs.to_vec());
        t
    };
    let gates = installed_gates(ctx).await;
    println!(
        "{}",
        predict(
            &view,
            &template_of(&containers),
            &template_of(&new_containers),
            &gates
        )
    );
    if dry_run {
        println!("(dry run: nothing changed)");
        return Ok(exit::OK);
    }
    // `test` guards against the containers changing between our read and the patch.
    let ops = json!([
        {"op": "test", "path": at, "value": containers},
        {"op": "replace", "path": at, "value": new_containers},
    ]);
    wl.json_patch(ops).await?;
    println!("{target} updated");
    Ok(exit::OK)
}

/// `set serviceaccount`: the template's `serviceAccountName`, written under the object's
/// resourceVersion so a concurrent change is not overwritten.
pub async fn service_account(ctx: &Ctx, target: &Target, name: &str, dry_run: bool) -> Result<i32> {
    let spec_path = target
        .kind
        .spec()
        .containers_path
        .strip_suffix("/containers")
        .filter(|_| target.kind != Kind::SidecarSet)
        .ok_or_else(|| {
            CliError::Usage(format!(
                "{target}: a SidecarSet has no Pod template; the service account is the Pods' own"
            ))
        })?;
    let wl = Workload::locate(ctx, target).await?;
    let obj = wl.fetch_raw().await?;
    let view = RolloutView::from_json(&obj);
    let old = obj.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let (new, current) = with_service_account(&old, name);
    if current.as_deref() == Some(name) {
        println!("{target}: serviceAccountName is already {name}: nothing will roll out");
        return Ok(exit::OK);
    }
    println!(
        "{target}: serviceAccountName {} -> {name}",
        current.as_deref().unwrap_or("(default)")
    );
    let gates = installed_gates(ctx).await;
    println!("{}", predict(&view, &old, &new, &gates));
    if dry_run {
        println!("(dry run: nothing changed)");
        return Ok(exit::OK);
    }
    let ops = json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": obj["metadata"]["resourceVersion"]},
        {"op": "add", "path": format!("{spec_path}/serviceAccountName"), "value": name},
    ]);
    wl.json_patch(ops).await?;
    println!("{target} updated");
    Ok(exit::OK)
}

/// The template with `serviceAccountName` set (and the deprecated `serviceAccount` alias
/// dropped, which the API server would otherwise fill back from it), and the current name.
pub fn with_service_account(template: &Value, name: &str) -> (Value, Option<String>) {
    let current = template["spec"]["serviceAccountName"]
        .as_str()
        .or_else(|| template["spec"]["serviceAccount"].as_str())
        .map(str::to_owned);
    let mut new = template.clone();
    if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("serviceAccount");
        spec.insert("serviceAccountName".to_owned(), json!(name));
    }
    (new, current)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cs(policy: &str, containers: Value) -> (RolloutView, Value) {
        let obj = json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet", "metadata": {"name": "w"},
            "spec": {"replicas": 4, "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": policy}},
                     "template": {"metadata": {"labels": {"app": "w"}},
                                  "spec": {"containers": containers}}}
        });
        (RolloutView::from_json(&obj), obj)
    }

    fn template(containers: &[Value]) -> Value {
        json!({"metadata": {"labels": {"app": "w"}}, "spec": {"containers": containers}})
    }

    fn app(resources: Value) -> Value {
        json!({"name": "app", "image": "nginx:1", "resources": resources})
    }

    #[test]
    fn env_arguments_in_kubectls_forms() {
        assert_eq!(
            parse_env(&["A=1".into(), "B=".into(), "C-".into()]),
            Ok(Edit::Env {
                set: vec![("A".into(), "1".into()), ("B".into(), String::new())],
                unset: vec!["C".into()]
            })
        );
        assert!(parse_env(&["=1".into()]).unwrap_err().contains("no name"));
        assert!(parse_env(&["A".into()]).unwrap_err().contains("KEY=VALUE"));
        assert!(parse_env(&[]).unwrap_err().contains("nothing to change"));
        assert_eq!(
            parse_resource_list("limits", Some("cpu=1,memory=64Mi")).unwrap(),
            BTreeMap::from([("cpu".into(), "1".into()), ("memory".into(), "64Mi".into())])
        );
        assert!(
            parse_resource_list("requests", Some("cpu"))
                .unwrap_err()
                .contains("--requests \"cpu\"")
        );
    }

    #[test]
    fn edits_only_the_named_containers() {
        let cs = vec![
            json!({"name": "app", "image": "a", "env": [{"name": "A", "value": "0"}, {"name": "C", "value": "x"}]}),
            json!({"name": "side", "image": "b"}),
        ];
        let edit = parse_env(&["A=1".into(), "C-".into(), "D=4".into()]).unwrap();
        let (out, changed) = apply(&cs, &["app".into()], &edit).unwrap();
        assert_eq!(changed, ["app"]);
        assert_eq!(
            out[0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "D", "value": "4"}])
        );
        assert_eq!(out[1], cs[1]);
        let (_, changed) = apply(&cs, &[], &edit).unwrap();
        assert_eq!(changed, ["app", "side"]);
        assert!(
            apply(&cs, &["nope".into()], &edit)
                .unwrap_err()
                .contains("containers: app, side")
        );
        let res = Edit::Resources {
            limits: BTreeMap::new(),
            requests: BTreeMap::from([("cpu".into(), "20m".into())]),
        };
        let (out, _) = apply(&cs, &["side".into()], &res).unwrap();
        assert_eq!(out[1]["resources"], json!({"requests": {"cpu": "20m"}}));
    }

    #[test]
    fn predictions_are_the_engines() {
        let on = FeatureGates::parse("InPlaceWorkloadVerticalScaling=true").unwrap();
        let off = FeatureGates::default();
        let burstable = app(json!({"requests": {"cpu": "10m"}}));
        let (view, _) = cs("InPlaceIfPossible", json!([burstable]));
        let old = template(std::slice::from_ref(&burstable));
        // An env change recreates, whatever the gates.
        let with_env = template(&[json!({"name": "app", "image": "nginx:1",
            "resources": {"requests": {"cpu": "10m"}}, "env": [{"name": "A", "value": "1"}]})]);
        let p = predict(&view, &old, &with_env, &on);
        assert!(p.contains("RECREATED") && p.contains("env changed"), "{p}");
        // cpu within the class: resized in place with the gate, recreated without it.
        let more_cpu = template(&[app(json!({"requests": {"cpu": "20m"}}))]);
        let p = predict(&view, &old, &more_cpu, &on);
        assert!(p.contains("RESIZED IN PLACE"), "{p}");
        let p = predict(&view, &old, &more_cpu, &off);
        assert!(p.contains("RECREATED"), "{p}");
        // A resource added (here a memory request) cannot go in place.
        let added = template(&[app(json!({"requests": {"cpu": "10m", "memory": "64Mi"}}))]);
        let p = predict(&view, &old, &added, &on);
        assert!(p.contains("RECREATED") && p.contains("was added"), "{p}");
        // Guaranteed to Burstable: the QoS class of a running Pod cannot change.
        let g = |cpu_limit: &str| {
            template(&[app(json!({"requests": {"cpu": "10m", "memory": "64Mi"},
                                  "limits": {"cpu": cpu_limit, "memory": "64Mi"}}))])
        };
        let p = predict(&view, &g("10m"), &g("20m"), &on);
        assert!(p.contains("RECREATED") && p.contains("QoS class"), "{p}");
        // InPlaceOnly says the webhook will refuse what cannot go in place.
        let (only, _) = cs("InPlaceOnly", json!([burstable]));
        assert!(predict(&only, &old, &with_env, &on).starts_with("REFUSED"));
        // ReCreate replaces Pods for any change.
        let (recreate, _) = cs("ReCreate", json!([burstable]));
        assert!(predict(&recreate, &old, &more_cpu, &on).contains("RECREATED"));
    }

    #[test]
    fn a_new_service_account_recreates_pods() {
        let burstable = app(json!({"requests": {"cpu": "10m"}}));
        let (view, _) = cs("InPlaceIfPossible", json!([burstable]));
        let mut old = template(std::slice::from_ref(&burstable));
        old["spec"]["serviceAccountName"] = json!("a");
        let (new, current) = with_service_account(&old, "b");
        assert_eq!(current.as_deref(), Some("a"));
        assert_eq!(new["spec"]["serviceAccountName"], "b");
        let p = predict(&view, &old, &new, &FeatureGates::default());
        assert!(p.contains("RECREATED"), "{p}");
        let (only, _) = cs("InPlaceOnly", json!([burstable]));
        assert!(predict(&only, &old, &new, &FeatureGates::default()).starts_with("REFUSED"));
        let (_, none) = with_service_account(&template(&[]), "b");
        assert_eq!(none, None);
    }
}
