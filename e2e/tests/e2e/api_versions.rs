//! Five kinds we serve in v1beta1 beside v1alpha1 (ResourceDistribution, PersistentPodState,
//! WorkloadSpread, UnitedDeployment, PodUnavailableBudget; upstream's master added v1beta1,
//! the v1.9.0 release has v1alpha1 only), against the install from `deploy/`: each is written in
//! v1beta1 with v1beta1's field names, read back in v1alpha1 with v1alpha1's (through the
//! conversion webhook), and acted on by its controller; its status, read in v1beta1, has
//! v1beta1's shape. A write in either version leaves exactly `["v1alpha1"]` in the CRD's
//! `status.storedVersions`, as the release stores them: v1beta1 is never stored.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_api::keys;
use kruise_e2e::resourcedistribution as rd;
use kruise_e2e::uniteddeployment::cloneset_template;
use kruise_e2e::{TestNamespace, client, wait_for};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(60);
const HOSTNAME: &str = "kubernetes.io/hostname";

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// The kind in both versions: `[v1alpha1, v1beta1]`.
fn both(
    client: &Client,
    ns: Option<&str>,
    group: &str,
    kind: &str,
    plural: &str,
) -> [Api<DynamicObject>; 2] {
    [keys::VERSION_V1ALPHA1, keys::VERSION_V1BETA1].map(|v| {
        let ar = resource(group, v, kind, plural);
        match ns {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        }
    })
}

async fn create(api: &Api<DynamicObject>, obj: Value) -> Result<DynamicObject, kube::Error> {
    let obj: DynamicObject = serde_json::from_value(obj).map_err(kube::Error::SerdeError)?;
    api.create(&PostParams::default(), &obj).await
}

/// `status.storedVersions` of the CRD `name` is exactly v1alpha1, the storage version.
async fn assert_stored_in_v1alpha1_only(client: &Client, name: &str) {
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(name)
        .await
        .expect("CRD");
    let stored = crd
        .status
        .and_then(|s| s.stored_versions)
        .unwrap_or_default();
    assert_eq!(stored, [keys::VERSION_V1ALPHA1], "{name}: storedVersions");
}

/// A v1beta1 ResourceDistribution selecting by `namespaceSelector` reaches the labelled
/// namespace; v1alpha1 calls the selector `namespaceLabelSelector`; a listed namespace that
/// does not exist shows in v1beta1's `failedNamespaces`.
#[tokio::test]
async fn resourcedistribution_in_v1beta1_distributes_and_reads_back_in_v1alpha1() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-rd-beta")
        .await
        .expect("ns");
    let key = format!("rd-beta.kruise.io/{}", ns.name);
    kruise_e2e::sidecarset::label_namespace(&client, &ns.name, json!({key.as_str(): "on"}))
        .await
        .expect("label");
    let name = ns.name.clone();
    let missing = format!("{}-missing", ns.name);
    let [alpha, beta] = both(
        &client,
        None,
        keys::APPS_GROUP,
        "ResourceDistribution",
        "resourcedistributions",
    );
    create(
        &beta,
        json!({"apiVersion": keys::APPS_V1BETA1, "kind": "ResourceDistribution",
            "metadata": {"name": name},
            "spec": {"resource": rd::secret("beta-copy", json!({"k": "v"})),
                     "targets": {"namespaceSelector": {"matchLabels": {key.as_str(): "on"}},
                                 "includedNamespaces": {"list": [{"name": missing}]}}}}),
    )
    .await
    .expect("create in v1beta1");
    let copy: Secret = wait_for("the copy in the labelled namespace", SETTLE, || async {
        rd::secret_in(&client, &ns.name, "beta-copy").await
    })
    .await
    .expect("copy");
    assert_eq!(copy.owner_references()[0].name, name);

    let a = alpha.get(&name).await.expect("read in v1alpha1");
    assert_eq!(
        a.data["spec"]["targets"]["namespaceLabelSelector"]["matchLabels"][&key],
        "on"
    );
    assert!(a.data["spec"]["targets"].get("namespaceSelector").is_none());
    let failed = wait_for(
        "the missing namespace in v1beta1's status",
        SETTLE,
        || async {
            let b = beta.get(&name).await?;
            let conditions = b.data["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            Ok(conditions
                .into_iter()
                .find(|c| c["type"] == "NamespaceNotExists" && c["status"] == "True"))
        },
    )
    .await
    .expect("status");
    assert_eq!(failed["failedNamespaces"], json!([missing]), "{failed}");
    assert!(failed.get("failedNamespace").is_none(), "{failed}");
    let a = alpha.get(&name).await.expect("read in v1alpha1");
    let alpha_cond = a.data["status"]["conditions"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|c| c["type"] == "NamespaceNotExists")
                .cloned()
        })
        .expect("condition in v1alpha1");
    assert_eq!(alpha_cond["failedNamespace"], json!([missing]));
    assert_stored_in_v1alpha1_only(&client, "resourcedistributions.apps.kruise.io").await;
    beta.delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
}

/// PersistentPodState: v1beta1's `keys` is v1alpha1's `nodeTopologyKeys`, both ways.
#[tokio::test]
async fn persistentpodstate_topology_keys_convert_both_ways() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-pps-beta")
        .await
        .expect("ns");
    let [alpha, beta] = both(
        &client,
        Some(&ns.name),
        keys::APPS_GROUP,
        "PersistentPodState",
        "persistentpodstates",
    );
    let target = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"});
    create(
        &beta,
        json!({"apiVersion": keys::APPS_V1BETA1, "kind": "PersistentPodState",
            "metadata": {"name": "db"},
            "spec": {"targetRef": target,
                     "requiredPersistentTopology": {"keys": [HOSTNAME]},
                     "preferredPersistentTopology": [
                        {"weight": 50, "preference": {"keys": ["topology.kubernetes.io/zone"]}}]}}),
    )
    .await
    .expect("create in v1beta1");
    let a = alpha.get("db").await.expect("read in v1alpha1");
    assert_eq!(
        a.data["spec"]["requiredPersistentTopology"],
        json!({"nodeTopologyKeys": [HOSTNAME]})
    );
    assert_eq!(
        a.data["spec"]["preferredPersistentTopology"][0]["preference"],
        json!({"nodeTopologyKeys": ["topology.kubernetes.io/zone"]})
    );
    // The same validation as v1alpha1: a second PersistentPodState for the same StatefulSet
    // is refused, whichever version it is written in.
    let dup = create(
        &alpha,
        json!({"apiVersion": keys::APPS_V1ALPHA1, "kind": "PersistentPodState",
            "metadata": {"name": "db2"},
            "spec": {"targetRef": target, "requiredPersistentTopology": {"nodeTopologyKeys": [HOSTNAME]}}}),
    )
    .await;
    // Refused by the PersistentPodState webhook for the conflict (upstream's 400, naming the
    // field and the PersistentPodState it conflicts with), not for anything else.
    match dup {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"), "{s:?}");
            assert!(
                s.message.contains("denied the request")
                    && s.message.contains("spec.targetRef")
                    && s.message
                        .contains("in conflict with other PersistentPodState db"),
                "{}",
                s.message
            );
        }
        other => panic!("a second PersistentPodState for one StatefulSet: {other:?}"),
    }
    // An edit in v1alpha1 reads in v1beta1.
    let edit =
        json!({"spec": {"requiredPersistentTopology": {"nodeTopologyKeys": [HOSTNAME, "zone"]}}});
    alpha
        .patch("db", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .expect("update in v1alpha1");
    let b = beta.get("db").await.expect("read in v1beta1");
    assert_eq!(
        b.data["spec"]["requiredPersistentTopology"],
        json!({"keys": [HOSTNAME, "zone"]})
    );
    assert_stored_in_v1alpha1_only(&client, "persistentpodstates.apps.kruise.io").await;
}

/// WorkloadSpread: v1beta1's `requiredNodeSelector`/`preferredNodeSelector` are v1alpha1's
/// `requiredNodeSelectorTerm`/`preferredNodeSelectorTerms`; the controller's status reads in
/// v1beta1.
#[tokio::test]
async fn workloadspread_subset_selectors_convert_and_the_status_reads_in_v1beta1() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ws-beta")
        .await
        .expect("ns");
    let term = kruise_e2e::hostname_term(&client).await;
    let [alpha, beta] = both(
        &client,
        Some(&ns.name),
        keys::APPS_GROUP,
        "WorkloadSpread",
        "workloadspreads",
    );
    // The target, with no Pods: the controller writes the status of a spread whose workload
    // exists.
    kruise_e2e::cloneset::api(&client, &ns.name)
        .create(
            &PostParams::default(),
            &kruise_e2e::cloneset::new("app", 0, "v1", json!({})).expect("cloneset"),
        )
        .await
        .expect("create CloneSet");
    create(
        &beta,
        json!({"apiVersion": keys::APPS_V1BETA1, "kind": "WorkloadSpread",
            "metadata": {"name": "ws"},
            "spec": {
                "targetRef": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "app"},
                "subsets": [
                    {"name": "a", "requiredNodeSelector": term, "maxReplicas": 1},
                    {"name": "b", "preferredNodeSelector": [{"weight": 1, "preference": term}]}]}}),
    )
    .await
    .expect("create in v1beta1");
    let a = alpha.get("ws").await.expect("read in v1alpha1");
    assert_eq!(
        a.data["spec"]["subsets"][0]["requiredNodeSelectorTerm"],
        term
    );
    assert_eq!(
        a.data["spec"]["subsets"][1]["preferredNodeSelectorTerms"][0]["preference"],
        term
    );
    assert!(
        a.data["spec"]["subsets"][0]
            .get("requiredNodeSelector")
            .is_none()
    );
    let st = wait_for("the subsets' status in v1beta1", SETTLE, || async {
        let b = beta.get("ws").await?;
        let subsets = b.data["status"]["subsetStatuses"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        Ok((subsets.len() == 2).then_some(subsets))
    })
    .await
    .expect("status");
    assert_eq!(st[0]["name"], "a");
    assert_eq!(st[0]["missingReplicas"], 1);
    assert_stored_in_v1alpha1_only(&client, "workloadspreads.apps.kruise.io").await;
}

/// UnitedDeployment: the template (a v1beta1 CloneSet spec in both versions, as upstream's)
/// reads the same in v1alpha1 and gives the subset's CloneSet its policy and budget; the
/// controller writes v1alpha1's `subsetReplicas` and `updateStatus`, which v1beta1 reads as
/// `subsetStatuses[].replicas` and `updatedRevision`.
#[tokio::test]
async fn uniteddeployment_status_reads_in_v1beta1_shape() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ud-beta")
        .await
        .expect("ns");
    let term = kruise_e2e::hostname_term(&client).await;
    let [alpha, beta] = both(
        &client,
        Some(&ns.name),
        keys::APPS_GROUP,
        "UnitedDeployment",
        "uniteddeployments",
    );
    // v1beta1's template holds a v1beta1 CloneSet spec (master's shape): the in-place policy,
    // the budget and a partition under `rollingUpdate`.
    let mut template = cloneset_template("udb", "v1");
    let strategy = json!({"type": "RollingUpdate", "rollingUpdate": {
        "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1, "partition": 1}});
    template["cloneSetTemplate"]["spec"]["updateStrategy"] = strategy.clone();
    create(
        &beta,
        json!({"apiVersion": keys::APPS_V1BETA1, "kind": "UnitedDeployment",
            "metadata": {"name": "web"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "udb"}},
                     "template": template,
                     "topology": {"subsets": [{"name": "a", "nodeSelectorTerm": term}]}}}),
    )
    .await
    .expect("create in v1beta1");
    let alpha_status = wait_for("v1alpha1 status from the controller", SETTLE, || async {
        let a = alpha.get("web").await?;
        let s = a.data["status"].clone();
        Ok(
            (s["subsetReplicas"]["a"] == 1 && s["updateStatus"]["updatedRevision"].is_string())
                .then_some(s),
        )
    })
    .await
    .expect("v1alpha1 status");
    // v1alpha1 reads the template as the release's v1alpha1 CloneSet spec (the policy is the
    // update type, the rest flat); the controller made the subset's CloneSet of it, with the
    // UnitedDeployment's own partition (none: 0).
    let a = alpha.get("web").await.expect("read in v1alpha1");
    assert_eq!(
        a.data["spec"]["template"]["cloneSetTemplate"]["spec"]["updateStrategy"],
        json!({"type": "InPlaceIfPossible", "maxUnavailable": 1, "partition": 1})
    );
    let b = beta.get("web").await.expect("read in v1beta1");
    assert_eq!(
        b.data["spec"]["template"]["cloneSetTemplate"]["spec"]["updateStrategy"], strategy,
        "and v1beta1 reads back what it wrote"
    );
    let children = kruise_e2e::uniteddeployment::cloneset_children(&client, &ns.name)
        .await
        .expect("children");
    let child = children.get("a").expect("the CloneSet of subset a");
    let child_strategy = &child.data["spec"]["updateStrategy"];
    assert_eq!(
        child_strategy["type"], "InPlaceIfPossible",
        "{child_strategy}"
    );
    assert_eq!(child_strategy["maxUnavailable"], 1, "{child_strategy}");
    assert_eq!(child_strategy["partition"], 0, "{child_strategy}");
    let b = beta.get("web").await.expect("read in v1beta1");
    let s = &b.data["status"];
    assert_eq!(
        s["updatedRevision"], alpha_status["updateStatus"]["updatedRevision"],
        "{s}"
    );
    let a_status = s["subsetStatuses"]
        .as_array()
        .and_then(|l| l.iter().find(|x| x["name"] == "a"))
        .unwrap_or_else(|| panic!("subset a in {s}"));
    assert_eq!(a_status["replicas"], 1, "{s}");
    assert!(
        s.get("subsetReplicas").is_none() && s.get("updateStatus").is_none(),
        "{s}"
    );
    assert_stored_in_v1alpha1_only(&client, "uniteddeployments.apps.kruise.io").await;
}

/// PodUnavailableBudget: v1beta1's `protectOperations` and `protectTotalReplicas` are
/// v1alpha1's annotations; `ignoredPodSelector`, which the controller cannot honour yet, is
/// refused naming the field; the status counts the protected total.
#[tokio::test]
async fn podunavailablebudget_fields_become_annotations_and_ignored_pods_are_refused() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-pub-beta")
        .await
        .expect("ns");
    let [alpha, beta] = both(
        &client,
        Some(&ns.name),
        keys::POLICY_GROUP,
        "PodUnavailableBudget",
        "podunavailablebudgets",
    );
    let policy_v1beta1 = format!("{}/{}", keys::POLICY_GROUP, keys::VERSION_V1BETA1);
    let spec = json!({"selector": {"matchLabels": {"app": "none"}}, "maxUnavailable": 1,
                      "protectOperations": ["DELETE", "EVICT"], "protectTotalReplicas": 3});
    create(
        &beta,
        json!({"apiVersion": policy_v1beta1, "kind": "PodUnavailableBudget",
               "metadata": {"name": "pub"}, "spec": spec}),
    )
    .await
    .expect("create in v1beta1");
    let a = alpha.get("pub").await.expect("read in v1alpha1");
    let ann = a.annotations();
    assert_eq!(
        ann.get(keys::PUB_PROTECT_OPERATIONS_ANNOTATION)
            .map(String::as_str),
        Some("DELETE,EVICT"),
        "{ann:?}"
    );
    assert_eq!(
        ann.get(keys::PUB_PROTECT_TOTAL_REPLICAS_ANNOTATION)
            .map(String::as_str),
        Some("3")
    );
    assert!(a.data["spec"].get("protectOperations").is_none());
    // The controller reads the annotation: three Pods expected, one may go, two must stay.
    wait_for("the status in v1beta1", SETTLE, || async {
        let b = beta.get("pub").await?;
        let s = &b.data["status"];
        Ok((s["totalReplicas"] == 3 && s["desiredAvailable"] == 2).then_some(()))
    })
    .await
    .expect("status");

    let mut ignored = spec.clone();
    ignored["ignoredPodSelector"] = json!({"matchLabels": {"skip": "yes"}});
    let refused = create(
        &beta,
        json!({"apiVersion": policy_v1beta1, "kind": "PodUnavailableBudget",
               "metadata": {"name": "pub-ignored"}, "spec": ignored}),
    )
    .await;
    match refused {
        Err(kube::Error::Api(s)) => {
            assert!(
                s.message.contains("spec.ignoredPodSelector"),
                "{}",
                s.message
            )
        }
        other => panic!("ignoredPodSelector accepted: {other:?}"),
    }
    assert_stored_in_v1alpha1_only(&client, "podunavailablebudgets.policy.kruise.io").await;
}
