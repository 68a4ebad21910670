//! UnitedDeployments stored by an earlier Kruise-rs build, whose v1alpha1 CloneSet template held
//! master's v1beta1 CloneSet spec (`updateStrategy.rollingUpdate.*`, `scaleStrategy.enablePVCReuse`).
//! Read through the release's schema, that template has lost its update strategy (the API
//! server prunes `rollingUpdate` on read) and its revision data no longer matches: left alone,
//! a new revision would relabel every subset's Pod template and the CloneSets, now `ReCreate`,
//! would recreate their Pods.
//!
//! Both are repaired from the UnitedDeployment's update revision, which the earlier build wrote
//! with the whole template: while the template is exactly what the schema left of it, the
//! template converted to v1alpha1 (the CloneSet's own conversion) is written back; and an
//! earlier revision compares as that converted template, so the restored template finds its
//! revision again and no Pod changes. Pure.

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_api::apps::v1alpha1::{
    CloneSetTemplateSpec, EARLIER_TEMPLATE_UPDATE_TYPE, UnitedDeployment,
};
use serde_json::Value;

/// `scaleStrategy` keys of the v1beta1 CloneSet spec only (the schema prunes them).
const BETA_SCALE_KEYS: [&str; 2] = ["enablePVCReuse", "excludePreparingDelete"];

/// The CloneSet template of a revision an earlier build wrote in v1beta1 shape.
fn earlier_template(rev: &ControllerRevision) -> Option<&Value> {
    let t = rev
        .data
        .as_ref()?
        .0
        .pointer("/spec/template/cloneSetTemplate")?;
    let us = t.pointer("/spec/updateStrategy");
    let ss = t.pointer("/spec/scaleStrategy");
    let beta_update = us.is_some_and(|u| {
        u.get("rollingUpdate").is_some()
            || u.get("type").and_then(Value::as_str) == Some(EARLIER_TEMPLATE_UPDATE_TYPE)
    });
    let beta_scale = ss.is_some_and(|s| BETA_SCALE_KEYS.iter().any(|k| s.get(*k).is_some()));
    (beta_update || beta_scale).then_some(t)
}

/// A template as this build reads and writes it (typed, then serialized).
fn normalized(t: &Value) -> Option<Value> {
    let typed: CloneSetTemplateSpec = serde_json::from_value(t.clone()).ok()?;
    serde_json::to_value(typed).ok()
}

/// What the release's schema leaves of an earlier template.
fn as_pruned(t: &Value) -> Option<Value> {
    let mut t = t.clone();
    if let Some(us) = t
        .pointer_mut("/spec/updateStrategy")
        .and_then(Value::as_object_mut)
    {
        us.remove("rollingUpdate");
    }
    if let Some(ss) = t
        .pointer_mut("/spec/scaleStrategy")
        .and_then(Value::as_object_mut)
    {
        for k in BETA_SCALE_KEYS {
            ss.remove(k);
        }
    }
    normalized(&t)
}

/// An earlier template converted to v1alpha1 by the CloneSet's conversion.
fn converted(t: &Value) -> Option<Value> {
    let mut c = kruise_webhook::cloneset::conversion::SCHEME.plain_backward(t);
    c.as_object_mut()?.remove("apiVersion");
    normalized(&c)
}

/// The CloneSet template to write back into `ud`: the update revision's earlier template
/// converted to v1alpha1, when `ud`'s template is exactly what the schema left of it (an edit
/// made since wins) and the conversion restores something.
pub fn restored_template(ud: &UnitedDeployment, update: &ControllerRevision) -> Option<Value> {
    let earlier = earlier_template(update)?;
    let now = serde_json::to_value(ud.spec.template.clone_set_template.as_ref()?).ok()?;
    if as_pruned(earlier)? != now {
        return None;
    }
    let restored = converted(earlier)?;
    (restored != now).then_some(restored)
}

/// `rev` as this build would write it for the same template, when an earlier build wrote it
/// (name, number and hash label kept): a restored template compares equal to it.
pub fn as_written_now(rev: &ControllerRevision) -> Option<ControllerRevision> {
    let c = converted(earlier_template(rev)?)?;
    let mut out = rev.clone();
    let slot = out
        .data
        .as_mut()?
        .0
        .pointer_mut("/spec/template/cloneSetTemplate")?;
    *slot = c;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::revision::{UpdateRevisionChoice, choose_update_revision, same_template};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
    use kruise_api::apps::{v1alpha1, v1beta1};
    use serde_json::json;

    use super::super::revisions::revision_data;

    /// A template as the earlier build took it (a v1beta1 CloneSet spec).
    fn earlier(update: Value) -> Value {
        json!({"metadata": {"labels": {"app": "web"}},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "app:v1"}]}},
                "updateStrategy": update,
                "scaleStrategy": {"enablePVCReuse": true}}})
    }

    /// The revision the earlier build wrote for it (its typed v1beta1 template, serialized).
    fn earlier_revision(t: &Value) -> ControllerRevision {
        let typed: v1beta1::CloneSetTemplateSpec =
            serde_json::from_value(t.clone()).expect("v1beta1 template");
        let mut template = serde_json::to_value(v1beta1::SubsetTemplate {
            clone_set_template: Some(Box::new(typed)),
            ..Default::default()
        })
        .expect("json");
        template["$patch"] = json!("replace");
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some("web-7c9d".into()),
                ..Default::default()
            },
            data: Some(RawExtension(json!({"spec": {"template": template}}))),
            revision: 1,
        }
    }

    /// The UnitedDeployment as this build reads the stored object: `rollingUpdate` and the
    /// v1beta1 scale keys pruned by the schema.
    fn read_now(t: &Value) -> v1alpha1::UnitedDeployment {
        let mut t = t.clone();
        if let Some(us) = t["spec"]["updateStrategy"].as_object_mut() {
            us.remove("rollingUpdate");
        }
        t["spec"]["scaleStrategy"] = json!({});
        serde_json::from_value(json!({"apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "UnitedDeployment", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "template": {"cloneSetTemplate": t}}}))
        .expect("v1alpha1")
    }

    fn candidate(ud: &v1alpha1::UnitedDeployment) -> ControllerRevision {
        ControllerRevision {
            data: Some(RawExtension(revision_data(ud).expect("data"))),
            revision: 2,
            ..Default::default()
        }
    }

    #[test]
    fn the_template_is_restored_and_keeps_its_revision() {
        for update in [
            json!({"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "partition": 1,
                "maxUnavailable": 2, "inPlaceUpdateStrategy": {"gracePeriodSeconds": 3}}}),
            json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceOnly"}}),
        ] {
            let t = earlier(update.clone());
            let rev = earlier_revision(&t);
            let mut ud = read_now(&t);
            // Measured without the repair: the pruned template is another revision, so every
            // subset's Pod template would be relabelled.
            assert!(!same_template(&rev, &candidate(&ud)), "{update}");
            let restored = restored_template(&ud, &rev).expect("restores");
            let us = &restored["spec"]["updateStrategy"];
            let policy = update["rollingUpdate"]["podUpdatePolicy"].clone();
            assert_eq!(us["type"], policy, "{restored}");
            assert_eq!(us["partition"], update["rollingUpdate"]["partition"]);
            assert_eq!(
                us["maxUnavailable"],
                update["rollingUpdate"]["maxUnavailable"]
            );
            assert!(
                restored["spec"]["scaleStrategy"]
                    .get("disablePVCReuse")
                    .is_none()
            );
            ud.spec.template.clone_set_template =
                Some(Box::new(serde_json::from_value(restored).expect("typed")));
            // Restored, the template finds the earlier revision: no new revision, no Pod
            // relabelled.
            let now = as_written_now(&rev).expect("an earlier revision");
            assert_eq!(now.metadata.name.as_deref(), Some("web-7c9d"));
            assert!(matches!(
                choose_update_revision(&[now], &candidate(&ud)),
                UpdateRevisionChoice::UseExisting(0)
            ));
            // Once restored there is nothing more to restore.
            assert_eq!(restored_template(&ud, &rev), None);
        }
    }

    #[test]
    fn an_edit_since_wins_and_a_release_revision_is_left_alone() {
        let t = earlier(json!({"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}}));
        let rev = earlier_revision(&t);
        let mut edited = t.clone();
        edited["spec"]["template"]["spec"]["containers"][0]["image"] = json!("app:v2");
        assert_eq!(restored_template(&read_now(&edited), &rev), None);
        // A revision this build wrote is no earlier one.
        let ud = read_now(&t);
        let ours = candidate(&ud);
        assert!(as_written_now(&ours).is_none());
        assert_eq!(restored_template(&ud, &ours), None);
    }
}
