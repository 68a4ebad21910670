//! `create job NAME --from=advancedcronjob/X` (kruise-tools' form: a Job made by hand from the
//! AdvancedCronJob's Job template, annotated `cronjob.kubernetes.io/instantiate: manual` and
//! owned by the AdvancedCronJob) and `advancedcronjob pause|resume` (`spec.paused`).

use kruise_api::keys;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Map, Value, json};

use crate::ctx::Ctx;
use crate::error::{CliError, Result, exit, kube_err};

const PLURAL: &str = "advancedcronjobs";

/// The AdvancedCronJob named by `--from`: `advancedcronjob/X`, `advancedcronjobs/X`, `acj/X`
/// (the short name) or the plural with its group.
pub fn parse_from(from: &str) -> std::result::Result<&str, String> {
    let (kind, name) = from
        .split_once('/')
        .ok_or_else(|| format!("--from={from:?}: expected advancedcronjob/NAME"))?;
    let known = matches!(
        kind.to_ascii_lowercase().as_str(),
        "advancedcronjob" | "advancedcronjobs" | "acj" | "advancedcronjobs.apps.kruise.io"
    );
    if !known || name.is_empty() {
        return Err(format!(
            "--from={from:?}: expected advancedcronjob/NAME (the only kind this plugin makes Jobs from)"
        ));
    }
    Ok(name)
}

/// The Job `name` made from the AdvancedCronJob `acj` (kruise-tools
/// `createJobFromAdvancedCronJob`): the template's labels, its annotations with
/// `cronjob.kubernetes.io/instantiate: manual`, the AdvancedCronJob as (non-controller) owner,
/// the template's spec. Only a Job template makes Jobs.
pub fn job_from(acj: &Value, name: &str) -> std::result::Result<Value, String> {
    let acj_name = acj["metadata"]["name"].as_str().unwrap_or_default();
    let Some(tpl) = acj["spec"]["template"]["jobTemplate"]
        .as_object()
        .filter(|t| !t.is_empty())
    else {
        let kind = acj["status"]["type"].as_str().unwrap_or("another kind of");
        return Err(format!(
            "advancedcronjob/{acj_name} makes {kind} runs: --from needs one with a jobTemplate"
        ));
    };
    let meta = tpl.get("metadata").cloned().unwrap_or(Value::Null);
    let mut annotations = meta["annotations"].as_object().cloned().unwrap_or_default();
    annotations.insert(
        keys::k8s::CRONJOB_INSTANTIATE_ANNOTATION.to_owned(),
        json!("manual"),
    );
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(name));
    metadata.insert("annotations".into(), Value::Object(annotations));
    if let Some(labels) = meta["labels"].as_object() {
        metadata.insert("labels".into(), Value::Object(labels.clone()));
    }
    metadata.insert(
        "ownerReferences".into(),
        json!([{
            "apiVersion": acj["apiVersion"],
            "kind": keys::ADVANCEDCRONJOB_KIND,
            "name": acj_name,
            "uid": acj["metadata"]["uid"],
        }]),
    );
    Ok(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": tpl.get("spec").cloned().unwrap_or_else(|| json!({})),
    }))
}

pub async fn create_job(ctx: &Ctx, name: &str, from: &str) -> Result<i32> {
    let acj_name = parse_from(from).map_err(CliError::Usage)?;
    let (acjs, ar) = ctx.kruise_api(PLURAL, Some(&ctx.namespace)).await?;
    let Some(acj) = acjs.get_opt(acj_name).await.map_err(kube_err)? else {
        return Err(CliError::NotFound {
            kind: keys::ADVANCEDCRONJOB_KIND.into(),
            name: acj_name.into(),
            namespace: ctx.namespace.clone(),
        });
    };
    let v = crate::ctx::typed_json(&acj, &ar);
    let body = job_from(&v, name).map_err(CliError::Usage)?;
    let job: k8s_openapi::api::batch::v1::Job =
        serde_json::from_value(body).map_err(|e| CliError::Other(e.into()))?;
    let jobs: Api<k8s_openapi::api::batch::v1::Job> =
        Api::namespaced(ctx.client.clone(), &ctx.namespace);
    jobs.create(&PostParams::default(), &job)
        .await
        .map_err(kube_err)?;
    println!("job.batch/{name} created");
    Ok(exit::OK)
}

pub async fn pause(ctx: &Ctx, name: &str, paused: bool) -> Result<i32> {
    let (acjs, _) = ctx.kruise_api(PLURAL, Some(&ctx.namespace)).await?;
    let _: DynamicObject = acjs
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"paused": paused}})),
        )
        .await
        .map_err(kube_err)?;
    println!(
        "advancedcronjob/{name} {}",
        if paused { "paused" } else { "resumed" }
    );
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_names_an_advancedcronjob() {
        assert_eq!(parse_from("advancedcronjob/nightly"), Ok("nightly"));
        assert_eq!(parse_from("acj/nightly"), Ok("nightly"));
        assert_eq!(parse_from("AdvancedCronJobs/nightly"), Ok("nightly"));
        assert!(parse_from("cronjob/nightly").is_err());
        assert!(parse_from("nightly").is_err());
        assert!(parse_from("acj/").is_err());
    }

    #[test]
    fn the_job_is_the_template_annotated_manual_and_owned() {
        let acj = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "AdvancedCronJob",
            "metadata": {"name": "nightly", "uid": "u1"},
            "spec": {"template": {"jobTemplate": {
                "metadata": {"labels": {"app": "x"}, "annotations": {"a": "b"}},
                "spec": {"backoffLimit": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}}}});
        let job = job_from(&acj, "by-hand").expect("a Job");
        assert_eq!(job["metadata"]["name"], "by-hand");
        assert_eq!(job["metadata"]["labels"]["app"], "x");
        assert_eq!(job["metadata"]["annotations"]["a"], "b");
        assert_eq!(
            job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
            "manual"
        );
        let owner = &job["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "AdvancedCronJob");
        assert_eq!(owner["uid"], "u1");
        assert!(owner.get("controller").is_none(), "not a scheduled run");
        assert_eq!(job["spec"]["backoffLimit"], 2);
        let bcj = json!({"metadata": {"name": "b"}, "status": {"type": "BroadcastJob"},
            "spec": {"template": {"broadcastJobTemplate": {"spec": {}}}}});
        let err = job_from(&bcj, "x").expect_err("no Job template");
        assert!(err.contains("makes BroadcastJob runs"), "{err}");
    }
}
