//! UnitedDeployments as the suite reads and writes them: raw JSON through `DynamicObject`, so the
//! webhook sees what a user would write and the suite checks upstream's field names.

use std::collections::BTreeMap;

use kruise_api::keys;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::Result;

pub fn api(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(keys::APPS_GROUP, keys::VERSION_V1ALPHA1, "UnitedDeployment"),
        "uniteddeployments",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// Creates the UnitedDeployment `name` with raw `spec`; the API server's answer.
pub async fn create_raw(
    client: &Client,
    ns: &str,
    name: &str,
    spec: Value,
) -> std::result::Result<DynamicObject, kube::Error> {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "UnitedDeployment",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .map_err(kube::Error::SerdeError)?;
    api(client, ns).create(&PostParams::default(), &obj).await
}

/// A v1alpha1 `cloneSetTemplate` (a v1alpha1 CloneSet spec, as the release's) of testapp Pods
/// labelled `app=<app>`, updated in place.
pub fn cloneset_template(app: &str, tag: &str) -> Value {
    json!({"cloneSetTemplate": {
        "metadata": {"labels": {"app": app}},
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{
                        "name": "app",
                        "image": crate::image("testapp", tag),
                        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}
                    }]
                }
            },
            "updateStrategy": {"type": "InPlaceIfPossible"}
        }
    }})
}

/// The CloneSets (read as v1alpha1, the version the controller writes) of a namespace by their `apps.kruise.io/subset-name` label (without the
/// ones being deleted).
pub async fn cloneset_children(
    client: &Client,
    ns: &str,
) -> Result<BTreeMap<String, DynamicObject>> {
    let ar = crate::cloneset::resource(keys::VERSION_V1ALPHA1);
    let sets: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let mut out = BTreeMap::new();
    for cs in sets
        .list(&ListParams::default().labels(keys::SUBSET_NAME_LABEL))
        .await?
        .items
    {
        if cs.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(s) = cs.labels().get(keys::SUBSET_NAME_LABEL) {
            out.insert(s.clone(), cs);
        }
    }
    Ok(out)
}

/// `spec.replicas` of each subset's CloneSet.
pub fn child_replicas(children: &BTreeMap<String, DynamicObject>) -> BTreeMap<String, i64> {
    children
        .iter()
        .map(|(k, v)| (k.clone(), v.data["spec"]["replicas"].as_i64().unwrap_or(-1)))
        .collect()
}

/// Replicas per subset name, as [`child_replicas`] reports them.
pub fn expect(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// Waits up to `timeout` until the subsets' CloneSets have these `spec.replicas` (and no others
/// exist); panics with what there is otherwise.
pub async fn wait_split(
    client: &Client,
    ns: &str,
    want: BTreeMap<String, i64>,
    timeout: std::time::Duration,
) {
    let what = format!("subset CloneSets {want:?}");
    let got = crate::wait_for(&what, timeout, || async {
        let children = cloneset_children(client, ns).await?;
        Ok((child_replicas(&children) == want).then_some(()))
    })
    .await;
    if got.is_err() {
        let have = child_replicas(&cloneset_children(client, ns).await.unwrap_or_default());
        panic!("{what}: have {have:?}");
    }
}
