//! Deletion protection against the install from `deploy/`, whose shipped gates turn
//! `ResourcesDeletionProtection` on (and leave `DeletionProtectionForCRDCascadingGate` off, as
//! upstream). Each case: the DELETE is refused with a 403 whose message names the label, the
//! object is still there with the same UID and no deletionTimestamp, and the DELETE goes through
//! once the label is removed or the condition clears. Nothing waits for a Pod to run: the webhook
//! counts objects, not readiness.

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, PersistentVolume, PersistentVolumeClaim, Pod, Service,
};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_api::features::Gate;
use kruise_api::keys;
use kruise_e2e::manager;
use kruise_e2e::{TestNamespace, client, cloneset, image, statefulset, wait_for};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Api, Client, Resource, ResourceExt};
use rand::Rng;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const LABEL: &str = keys::DELETE_PROTECTION_LABEL;

/// Deletes `name` expecting the webhook's refusal; returns its message after checking that it is
/// a 403 naming the label and that the object is untouched (same UID, no deletionTimestamp).
async fn refused<K>(api: &Api<K>, name: &str) -> String
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let before = api.get(name).await.expect("the object exists");
    let message = match api.delete(name, &DeleteParams::default()).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403, "a Forbidden refusal: {s:?}");
            assert!(
                s.message
                    .contains("forbidden by ResourcesProtectionDeletion")
                    || s.message.contains("feature-gate")
                    || s.message.contains("failed to list"),
                "upstream's text: {}",
                s.message
            );
            assert!(s.message.contains(LABEL), "names the label: {}", s.message);
            s.message
        }
        other => panic!("DELETE {name} should be refused, got {other:?}"),
    };
    let after = api.get(name).await.expect("still there after the refusal");
    assert_eq!(after.uid(), before.uid(), "{name}: the same object");
    assert!(
        after.meta().deletion_timestamp.is_none(),
        "{name}: not being deleted"
    );
    message
}

/// Deletes `name` expecting it to be accepted.
async fn allowed<K>(api: &Api<K>, name: &str)
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    if let Err(e) = api.delete(name, &DeleteParams::background()).await {
        panic!("DELETE {name} should be allowed: {e}");
    }
}

/// Sets (`Some`) or removes (`None`) the protection label.
async fn label<K>(api: &Api<K>, name: &str, value: Option<&str>)
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {LABEL: value}}})),
    )
    .await
    .expect("label the object");
}

fn labelled(value: &str) -> Value {
    json!({ LABEL: value })
}

#[tokio::test]
async fn namespace_always_is_refused_until_the_label_goes() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-dp-ns-always")
        .await
        .expect("ns");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    label(&namespaces, &ns.name, Some("Always")).await;
    let m = refused(&namespaces, &ns.name).await;
    assert!(m.contains(&format!("{LABEL}=Always")), "{m}");
    assert!(m.contains("remove the label"), "says what to do: {m}");
    // Counted as upstream counts it: under the namespace's name and the requester.
    let counted = manager::metric_sum(
        &client,
        "kruise_manager_namespace_deletion_protection_total",
        &format!("name=\"{}\"", ns.name),
    )
    .await
    .expect("the manager's metrics");
    assert_eq!(counted, 1.0, "one refusal");
    label(&namespaces, &ns.name, None).await;
    ns.delete().await.expect("allowed once the label is gone");
}

#[tokio::test]
async fn namespace_cascading_is_refused_while_a_pod_is_active() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-dp-ns-cascading")
        .await
        .expect("ns");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let pods: Api<Pod> = ns.api();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "idle"},
        "spec": {"terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "idle", "image": image("sidecar", "v1")}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    label(&namespaces, &ns.name, Some("Cascading")).await;
    // A Pod is active from its creation (not Succeeded, not Failed, not being deleted).
    let m = refused(&namespaces, &ns.name).await;
    assert!(
        m.contains(&format!("{LABEL}=Cascading and active pods 1>0")),
        "{m}"
    );
    assert!(m.contains("first delete its Pods"), "says what to do: {m}");
    pods.delete("idle", &DeleteParams::default().grace_period(0))
        .await
        .expect("delete pod");
    // A Pod being deleted no longer counts.
    ns.delete()
        .await
        .expect("allowed once no Pod is active (label kept)");
}

/// A Namespace labelled Cascading is held by a Bound PVC (and by nothing else here: no Pod). The
/// PVC binds at once to a PersistentVolume made for it (static binding, a storage class name no
/// provisioner serves), so no Pod has to run for the binding.
#[tokio::test]
async fn namespace_cascading_is_refused_while_a_pvc_is_bound() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-dp-ns-pvc")
        .await
        .expect("ns");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let suffix: u32 = rand::rng().random_range(0..0xff_ffff);
    let pv_name = format!("e2e-dp-{suffix:06x}");
    let class = "e2e-dp-static";
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": pv_name},
        "spec": {
            "capacity": {"storage": "1Mi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": class,
            "hostPath": {"path": format!("/tmp/{pv_name}")},
            "claimRef": {"namespace": ns.name, "name": "data"}
        }
    }))
    .expect("pv");
    pvs.create(&PostParams::default(), &pv)
        .await
        .expect("create PV");
    let pvcs: Api<PersistentVolumeClaim> = ns.api();
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "volumeName": pv_name, "resources": {"requests": {"storage": "1Mi"}}}
    }))
    .expect("pvc");
    pvcs.create(&PostParams::default(), &pvc)
        .await
        .expect("create PVC");
    label(&namespaces, &ns.name, Some("Cascading")).await;
    // Pending PVCs do not count: until the binder has run, the namespace may go.
    wait_for("the PVC Bound", Duration::from_secs(60), || async {
        let c = pvcs.get("data").await?;
        let phase = c.status.and_then(|s| s.phase);
        Ok((phase.as_deref() == Some("Bound")).then_some(()))
    })
    .await
    .expect("bound");
    let m = refused(&namespaces, &ns.name).await;
    assert!(
        m.contains(&format!("{LABEL}=Cascading and \"Bound\" status pvc 1>0")),
        "{m}"
    );
    assert!(
        m.contains("first delete its Bound PersistentVolumeClaims"),
        "says what to do: {m}"
    );
    pvcs.delete("data", &DeleteParams::default())
        .await
        .expect("delete PVC");
    // A PVC being deleted (or gone) no longer counts.
    ns.delete()
        .await
        .expect("allowed once no PVC is Bound (label kept)");
    pvs.delete(&pv_name, &DeleteParams::default())
        .await
        .expect("delete PV");
}

/// A CRD of a group of its own (a CRD name is cluster-wide, and kinds must be unique in a group),
/// labelled `Always`, established, with one object `one` in the test's namespace.
struct Widgets {
    crds: Api<CustomResourceDefinition>,
    /// The CRD's name, `widgets.<group>`.
    name: String,
    group: String,
    widgets: Api<DynamicObject>,
}

impl Widgets {
    async fn create(client: &Client, ns: &TestNamespace) -> Widgets {
        let suffix: u32 = rand::rng().random_range(0..0xff_ffff);
        let group = format!("g{suffix:06x}.dp.e2e.kruise-rs.io");
        let name = format!("widgets.{group}");
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labelled("Always")},
            "spec": {
                "group": group, "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                              "schema": {"openAPIV3Schema": {"type": "object"}}}]
            }
        }))
        .expect("crd");
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("create CRD");
        let m = refused(&crds, &name).await;
        assert!(m.contains(&format!("{LABEL}=Always")), "{m}");

        let established = |c: &CustomResourceDefinition| {
            c.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                })
        };
        wait_for("the CRD established", Duration::from_secs(30), || async {
            Ok(crds
                .get(&name)
                .await
                .map(|c| established(&c).then_some(()))?)
        })
        .await
        .expect("established");
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&group, "v1", "Widget"),
            "widgets",
        );
        let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);
        let widget: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "one"}
        }))
        .expect("widget");
        widgets
            .create(&PostParams::default(), &widget)
            .await
            .expect("create widget");
        Widgets {
            crds,
            name,
            group,
            widgets,
        }
    }
}

#[tokio::test]
async fn crd_cascading_is_refused_until_the_label_goes() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-dp-crd")
        .await
        .expect("ns");
    let Widgets {
        crds,
        name,
        widgets,
        ..
    } = Widgets::create(&client, &ns).await;

    label(&crds, &name, Some("Cascading")).await;
    // As shipped, DeletionProtectionForCRDCascadingGate is off: upstream then refuses a CRD
    // labelled Cascading whatever it holds, until the label goes.
    let m = refused(&crds, &name).await;
    assert!(
        m.contains("feature-gate DeletionProtectionForCRDCascadingGate is not enabled"),
        "{m}"
    );
    assert!(m.contains(&format!("{LABEL}=Cascading")), "{m}");
    widgets
        .delete("one", &DeleteParams::default())
        .await
        .expect("delete widget");
    let m = refused(&crds, &name).await;
    assert!(m.contains("DeletionProtectionForCRDCascadingGate"), "{m}");
    label(&crds, &name, None).await;
    allowed(&crds, &name).await;
    ns.delete().await.expect("delete ns");
}

/// With `DeletionProtectionForCRDCascadingGate` on (off by default, as upstream: a gated-phase
/// test), a CRD labelled Cascading is counted for its objects. The
/// shipped ClusterRole does not grant `list` on every resource, so the count first fails closed
/// naming the missing permission; once the shipped switch grants `list` on every resource
/// (deploy/overlays/crd-cascading, applied as its file says), the CRD is refused while it holds
/// an object and deleted once it holds none.
#[tokio::test]
async fn gated_crd_cascading_counts_objects_with_the_gate() {
    let client = client().await.expect("cluster");
    manager::require_gates(&client, &[Gate::DeletionProtectionForCRDCascadingGate])
        .await
        .expect("the gated phase's manager");
    let ns = TestNamespace::create(&client, "e2e-dp-crd-gate")
        .await
        .expect("ns");
    let Widgets {
        crds,
        name,
        group,
        widgets,
    } = Widgets::create(&client, &ns).await;
    label(&crds, &name, Some("Cascading")).await;

    let m = refused(&crds, &name).await;
    assert!(m.contains("failed to list CRs of"), "{m}");
    assert!(m.contains(&group), "names the CRD's group: {m}");
    assert!(m.contains("forbidden"), "the missing permission: {m}");
    assert!(m.contains("protects it until the count can be read"), "{m}");

    // The shipped switch (deploy/overlays/crd-cascading, the Helm value
    // deletionProtection.listAllResources): its ClusterRole and binding, as `kubectl apply -k`
    // of the overlay adds them to the install.
    let switch = kruise_e2e::repo_root().join("deploy/overlays/crd-cascading/list-all.yaml");
    let docs: Vec<Value> = serde_saphyr::from_multiple(
        &std::fs::read_to_string(&switch).expect("the overlay's list-all.yaml"),
    )
    .expect("YAML");
    let of_kind = |kind: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("{kind} in {}", switch.display()))
    };
    let role: ClusterRole = serde_json::from_value(of_kind("ClusterRole")).expect("role");
    let binding: ClusterRoleBinding =
        serde_json::from_value(of_kind("ClusterRoleBinding")).expect("binding");
    let grant = role.name_any();
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("create ClusterRole");
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("create ClusterRoleBinding");
    // The authorizer sees a new binding within moments; the first refusals may still be the
    // permission's.
    let m = wait_for("the count refusal", Duration::from_secs(30), || async {
        let m = refused(&crds, &name).await;
        Ok(m.contains("active CRs").then_some(m))
    })
    .await
    .expect("counted");
    assert!(
        m.contains(&format!("{LABEL}=Cascading and active CRs 1>0")),
        "{m}"
    );
    assert!(
        m.contains("first delete its objects"),
        "says what to do: {m}"
    );

    widgets
        .delete("one", &DeleteParams::default())
        .await
        .expect("delete widget");
    allowed(&crds, &name).await;
    for deleted in [
        bindings
            .delete(&binding.name_any(), &DeleteParams::default())
            .await
            .map(|_| ()),
        roles
            .delete(&grant, &DeleteParams::default())
            .await
            .map(|_| ()),
    ] {
        deleted.expect("delete the grant");
    }
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn deployment_cascading_is_refused_until_scaled_to_zero() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-dp-deploy")
        .await
        .expect("ns");
    let deployments: Api<Deployment> = ns.api();
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": labelled("Cascading")},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"terminationGracePeriodSeconds": 0,
                                  "containers": [{"name": "idle", "image": image("sidecar", "v1")}]}}
        }
    }))
    .expect("deployment");
    deployments
        .create(&PostParams::default(), &deploy)
        .await
        .expect("create Deployment");
    let m = refused(&deployments, "web").await;
    assert!(
        m.contains(&format!("{LABEL}=Cascading and replicas 1>0")),
        "{m}"
    );
    assert!(
        m.contains("scale spec.replicas to 0"),
        "says what to do: {m}"
    );
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .expect("scale to 0");
    allowed(&deployments, "web").await;
    ns.delete().await.expect("delete ns");
}

/// Both served versions of a Kruise workload are protected: the DELETE through v1alpha1 carries
/// the converted object.
async fn kruise_workload_cascading(
    client: &Client,
    ns: &str,
    resource: impl Fn(&str) -> ApiResource,
    mut obj: DynamicObject,
) {
    let name = obj.name_any();
    obj.metadata.labels = Some([(LABEL.to_owned(), "Cascading".to_owned())].into());
    let beta: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &resource(keys::VERSION_V1BETA1));
    let alpha: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &resource(keys::VERSION_V1ALPHA1));
    beta.create(&PostParams::default(), &obj)
        .await
        .expect("create");
    for api in [&beta, &alpha] {
        let m = refused(api, &name).await;
        assert!(
            m.contains(&format!("{LABEL}=Cascading and replicas 1>0")),
            "{m}"
        );
    }
    beta.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 0}})),
    )
    .await
    .expect("scale to 0");
    allowed(&beta, &name).await;
}

#[tokio::test]
async fn cloneset_cascading_is_refused_until_scaled_to_zero() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-dp-cloneset")
        .await
        .expect("ns");
    let cs = cloneset::new("web", 1, "v1", json!({})).expect("cloneset");
    kruise_workload_cascading(&client, &ns.name, cloneset::resource, cs).await;
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn advanced_statefulset_cascading_is_refused_until_scaled_to_zero() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-dp-asts")
        .await
        .expect("ns");
    let sts = statefulset::new("db", 1, "v1", false, json!({})).expect("statefulset");
    kruise_workload_cascading(&client, &ns.name, statefulset::resource, sts).await;
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn service_honours_always_and_ignores_cascading() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-dp-svc")
        .await
        .expect("ns");
    let services: Api<Service> = ns.api();
    for (name, value) in [("always", "Always"), ("cascading", "Cascading")] {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labelled(value)},
            "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80}]}
        }))
        .expect("service");
        services
            .create(&PostParams::default(), &svc)
            .await
            .expect("create Service");
    }
    let m = refused(&services, "always").await;
    assert!(m.contains(&format!("{LABEL}=Always")), "{m}");
    // Upstream honours Always only for Services.
    allowed(&services, "cascading").await;
    label(&services, "always", None).await;
    allowed(&services, "always").await;
    ns.delete().await.expect("delete ns");
}

/// A labelled apps/v1 workload of `kind` with one replica (no Pod needs to run: the webhook
/// reads `spec.replicas`).
fn apps_workload<K: DeserializeOwned>(name: &str, extra: Value) -> K {
    let mut spec = json!({
        "replicas": 1,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
                     "spec": {"terminationGracePeriodSeconds": 0,
                              "containers": [{"name": "idle", "image": image("sidecar", "v1")}]}}
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labelled("Cascading")}, "spec": spec
    }))
    .expect("workload")
}

/// Refused while `spec.replicas` is 1, allowed once scaled to 0 (label kept).
async fn cascading_until_zero<K>(api: &Api<K>, name: &str, kind: &str)
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let m = refused(api, name).await;
    assert!(
        m.contains(&format!("{LABEL}=Cascading and replicas 1>0")),
        "{m}"
    );
    assert!(m.contains(&format!("to delete the {kind}")), "{m}");
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 0}})),
    )
    .await
    .expect("scale to 0");
    allowed(api, name).await;
}

#[tokio::test]
async fn replicaset_and_statefulset_cascading_are_refused_until_scaled_to_zero() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-dp-rs-sts")
        .await
        .expect("ns");
    let sets: Api<ReplicaSet> = ns.api();
    sets.create(&PostParams::default(), &apps_workload("rs", json!({})))
        .await
        .expect("create ReplicaSet");
    cascading_until_zero(&sets, "rs", "ReplicaSet").await;
    let statefulsets: Api<StatefulSet> = ns.api();
    statefulsets
        .create(
            &PostParams::default(),
            &apps_workload("sts", json!({"serviceName": "sts"})),
        )
        .await
        .expect("create StatefulSet");
    cascading_until_zero(&statefulsets, "sts", "StatefulSet").await;
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn ingress_honours_always_and_ignores_cascading() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-dp-ing")
        .await
        .expect("ns");
    let ingresses: Api<Ingress> = ns.api();
    for (name, value) in [("always", "Always"), ("cascading", "Cascading")] {
        let ing: Ingress = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labelled(value)},
            "spec": {"defaultBackend": {"service": {"name": name, "port": {"number": 80}}}}
        }))
        .expect("ingress");
        ingresses
            .create(&PostParams::default(), &ing)
            .await
            .expect("create Ingress");
    }
    let m = refused(&ingresses, "always").await;
    assert!(m.contains(&format!("{LABEL}=Always")), "{m}");
    // Upstream honours Always only for Ingresses.
    allowed(&ingresses, "cascading").await;
    label(&ingresses, "always", None).await;
    allowed(&ingresses, "always").await;
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn a_value_upstream_does_not_know_protects_nothing() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-dp-unknown")
        .await
        .expect("ns");
    let deployments: Api<Deployment> = ns.api();
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": labelled("always")},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"terminationGracePeriodSeconds": 0,
                                  "containers": [{"name": "idle", "image": image("sidecar", "v1")}]}}
        }
    }))
    .expect("deployment");
    deployments
        .create(&PostParams::default(), &deploy)
        .await
        .expect("create Deployment");
    // The values are case-sensitive: "always" is not "Always".
    allowed(&deployments, "web").await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    label(&namespaces, &ns.name, Some("Never")).await;
    ns.delete()
        .await
        .expect("a Namespace labelled Never is deleted");
}
