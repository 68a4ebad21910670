//! Moving between OpenKruise v1.9 and Kruise-rs by swapping CRDs, objects kept: our CRDs serve
//! and store the versions upstream's do and have its fields (checked against upstream's own
//! files, fetched by `hack/build-openkruise.sh --source`), and on the cluster OpenKruise's CRDs
//! are accepted over ours and ours over theirs with a CloneSet, a ContainerRecreateRequest, an
//! Advanced StatefulSet and one object of each kind stored as v1beta1 with renamed fields in it,
//! which stay readable, unchanged, and reconciled once ours are back.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_api::keys;
use kruise_e2e::crds::{self, OursBack};
use kruise_e2e::{TestNamespace, client, cloneset, statefulset, wait_for};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

const ROLLOUT: Duration = Duration::from_secs(180);

/// CRDs whose versions, storage version or conversion differ from upstream v1.9's (none now).
/// A cluster that ran OpenKruise v1.9 could not take such a CRD of ours back when it drops a
/// version in `status.storedVersions`. Each entry must really differ: fixing one fails this
/// test until the entry goes.
const NOT_YET_AS_UPSTREAM: &[&str] = &[];

/// CRDs ours convert through the webhook where upstream's installed CRD does not. Upstream has
/// the patch (`config/crd/patches/webhook_in_podunavailablebudgets.yaml`) but its
/// kustomization leaves it out, so its API server would only relabel a PodUnavailableBudget and
/// v1beta1's `protectOperations`/`protectTotalReplicas` would never show as v1alpha1's
/// annotations; our controller reads v1alpha1, so ours converts. The versions served and stored
/// are upstream's, so the CRDs still swap both ways.
const CONVERTED_WHERE_UPSTREAM_IS_NOT: &[&str] = &["podunavailablebudgets.policy.kruise.io"];

/// The CRDs the round trip swaps.
const SWAPPED: &[&str] = &[
    "apps.kruise.io_clonesets.yaml",
    "apps.kruise.io_containerrecreaterequests.yaml",
    "apps.kruise.io_statefulsets.yaml",
    "apps.kruise.io_persistentpodstates.yaml",
    "apps.kruise.io_resourcedistributions.yaml",
    "apps.kruise.io_uniteddeployments.yaml",
    "apps.kruise.io_workloadspreads.yaml",
    "policy.kruise.io_podunavailablebudgets.yaml",
];

/// One object of each kind upstream v1.9 stores as v1beta1 with other field names than
/// v1alpha1, written in v1beta1 with those names: `(group, kind, plural, namespaced, object)`.
/// They only need to be kept, so none of them has anything to act on.
fn beta_objects(ns: &str) -> Vec<(&'static str, &'static str, &'static str, bool, Value)> {
    let apps = |kind: &str, name: &str, spec: Value| {
        json!({"apiVersion": keys::APPS_V1BETA1, "kind": kind, "metadata": {"name": name},
               "spec": spec})
    };
    let term = json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z9"]}]});
    vec![
        (
            keys::APPS_GROUP,
            "PersistentPodState",
            "persistentpodstates",
            true,
            apps(
                "PersistentPodState",
                "pps",
                json!({
            "targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "none"},
            "requiredPersistentTopology": {"keys": ["kubernetes.io/hostname"]}}),
            ),
        ),
        (
            keys::APPS_GROUP,
            "ResourceDistribution",
            "resourcedistributions",
            false,
            apps(
                "ResourceDistribution",
                &format!("{ns}-rd"),
                json!({
            "resource": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rd"},
                         "data": {"k": "v"}},
            "targets": {"namespaceSelector": {"matchLabels": {"rd-of": ns}}}}),
            ),
        ),
        (
            keys::APPS_GROUP,
            "UnitedDeployment",
            "uniteddeployments",
            true,
            apps(
                "UnitedDeployment",
                "ud",
                json!({
            "replicas": 0, "selector": {"matchLabels": {"app": "ud"}},
            "template": {"cloneSetTemplate": {"metadata": {"labels": {"app": "ud"}},
                "spec": {"selector": {"matchLabels": {"app": "ud"}},
                    "template": {"metadata": {"labels": {"app": "ud"}},
                        "spec": {"containers": [{"name": "c", "image": "none"}]}},
                    "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible",
                                                         "partition": 1}}}}},
            "topology": {"subsets": [{"name": "a", "nodeSelectorTerm": term}]}}),
            ),
        ),
        (
            keys::APPS_GROUP,
            "WorkloadSpread",
            "workloadspreads",
            true,
            apps(
                "WorkloadSpread",
                "ws",
                json!({
            "targetRef": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
                          "name": "none"},
            "subsets": [{"name": "a", "requiredNodeSelector": term, "maxReplicas": 1}]}),
            ),
        ),
        (
            keys::POLICY_GROUP,
            "PodUnavailableBudget",
            "podunavailablebudgets",
            true,
            json!({"apiVersion": format!("{}/{}", keys::POLICY_GROUP, keys::VERSION_V1BETA1),
                "kind": "PodUnavailableBudget", "metadata": {"name": "pub"},
                "spec": {"selector": {"matchLabels": {"app": "none"}}, "maxUnavailable": 1,
                         "protectOperations": ["DELETE"], "protectTotalReplicas": 2}}),
        ),
    ]
}

fn beta_api(
    client: &Client,
    ns: &str,
    group: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, keys::VERSION_V1BETA1, kind),
        plural,
    );
    if namespaced {
        Api::namespaced_with(client.clone(), ns, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    }
}

/// Waits until the budget `pub` (read in v1beta1) counts `n` in `status.totalReplicas`.
async fn total_replicas(
    budgets: &Api<DynamicObject>,
    n: i64,
    what: &str,
) -> kruise_e2e::Result<()> {
    wait_for(what, Duration::from_secs(60), || async {
        let b = budgets.get("pub").await?;
        Ok((b.data["status"]["totalReplicas"] == json!(n)).then_some(()))
    })
    .await
}

/// The specs of [`beta_objects`], read in v1beta1.
async fn beta_specs(client: &Client, ns: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for (group, kind, plural, namespaced, obj) in beta_objects(ns) {
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let got = beta_api(client, ns, group, kind, plural, namespaced)
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("{kind} {name}: {e}"));
        out.push(got.data["spec"].clone());
    }
    out
}

fn crds_in(dir: &Path) -> BTreeMap<String, (String, CustomResourceDefinition)> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("CRD directory") {
        let file = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if !file.ends_with(".yaml") {
            continue;
        }
        let crd = crds::read(dir, &file).expect("CRD");
        out.insert(crd.metadata.name.clone().unwrap_or_default(), (file, crd));
    }
    out
}

/// Upstream's installed CRDs get a conversion webhook by a kustomize patch (config/default);
/// the names of the CRDs it patches, from config/crd/kustomization.yaml.
fn upstream_webhook_crds(
    bases: &Path,
    crds: &BTreeMap<String, (String, CustomResourceDefinition)>,
) -> BTreeSet<String> {
    let kustomization = bases.join("../kustomization.yaml");
    let text = std::fs::read_to_string(&kustomization).expect("upstream kustomization.yaml");
    let plurals: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- patches/webhook_in_"))
        .filter_map(|l| l.strip_suffix(".yaml"))
        .collect();
    crds.iter()
        .filter(|(_, (_, c))| plurals.contains(c.spec.names.plural.as_str()))
        .map(|(n, _)| n.clone())
        .collect()
}

fn served(crd: &CustomResourceDefinition) -> BTreeSet<&str> {
    crd.spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.as_str())
        .collect()
}

fn strategy(crd: &CustomResourceDefinition) -> &str {
    crd.spec
        .conversion
        .as_ref()
        .map_or("None", |c| c.strategy.as_str())
}

/// Every CRD we ship that upstream has serves at least upstream's versions, stores upstream's
/// storage version and converts as upstream's installed CRD does, but for the kinds listed in
/// [`NOT_YET_AS_UPSTREAM`].
#[test]
fn versions_and_conversion_as_upstream() {
    let bases = crds::openkruise_crd_dir().expect("OpenKruise v1.9 source");
    let upstream = crds_in(&bases);
    let ours = crds_in(&crds::our_crd_dir());
    let webhook = upstream_webhook_crds(&bases, &upstream);
    let mut wrong = Vec::new();
    for (name, (_, theirs)) in &upstream {
        let Some((_, mine)) = ours.get(name) else {
            continue;
        };
        let converts =
            webhook.contains(name) || CONVERTED_WHERE_UPSTREAM_IS_NOT.contains(&name.as_str());
        let same = served(mine).is_superset(&served(theirs))
            && crds::storage_version(mine) == crds::storage_version(theirs)
            && (strategy(mine) == "Webhook") == converts;
        let listed = NOT_YET_AS_UPSTREAM.contains(&name.as_str());
        if same == listed {
            wrong.push(format!(
                "{name}: ours serve {:?} store {:?} convert {}; upstream serve {:?} store {:?} \
                 webhook {}{}",
                served(mine),
                crds::storage_version(mine),
                strategy(mine),
                served(theirs),
                crds::storage_version(theirs),
                webhook.contains(name),
                if listed {
                    " (listed as not yet as upstream, but is)"
                } else {
                    ""
                }
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Field paths where our schema knowingly differs from upstream's, as `crd version path`
/// (`+` we have it, upstream has not; `-` the other way), each with its reason. Anything not
/// listed fails [`fields_as_upstream`]; a listed entry that no longer differs fails it too.
const KNOWN_FIELD_DIFFERENCES: &[&str] = &[
    // Ours: v1alpha1 reuses v1beta1's spec, so it also shows v1beta1's scaleStrategy (the
    // controller reads it in both; upstream's v1alpha1 prunes it).
    "+ daemonsets.apps.kruise.io v1alpha1 /spec/scaleStrategy",
    "+ daemonsets.apps.kruise.io v1alpha1 /spec/scaleStrategy/partitionedScaling",
    // Ours: the SidecarSet's status keeps conditions (why an upgrade is blocked).
    "+ sidecarsets.apps.kruise.io v1alpha1 /status/conditions",
    "+ sidecarsets.apps.kruise.io v1beta1 /status/conditions",
    // Ours: a NodePodProbe entry names the PodProbeMarker it comes from.
    "+ nodepodprobes.apps.kruise.io v1alpha1 /spec/podProbes[]/probes[]/podProbeMarkerName",
];

/// The field paths of a schema: `/a/b` for properties, `[]` for items, `{}` for map values;
/// an object kept as written (`x-kubernetes-preserve-unknown-fields` without properties)
/// ends its path with `/*`, and nothing below it is compared.
fn field_paths(schema: &Value, at: &str, out: &mut BTreeSet<String>) {
    let Some(obj) = schema.as_object() else {
        return;
    };
    if obj.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true))
        && !obj.contains_key("properties")
    {
        out.insert(format!("{at}/*"));
        return;
    }
    for (k, v) in obj
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let p = format!("{at}/{k}");
        out.insert(p.clone());
        field_paths(v, &p, out);
    }
    if let Some(items) = obj.get("items") {
        field_paths(items, &format!("{at}[]"), out);
    }
    if let Some(values) = obj.get("additionalProperties") {
        field_paths(values, &format!("{at}{{}}"), out);
    }
}

/// Whether `path` lies in a region `paths` keeps as written (so it is not compared).
fn under_schemaless(path: &str, paths: &BTreeSet<String>) -> bool {
    let p = path.strip_suffix("/*").unwrap_or(path);
    paths.iter().filter_map(|w| w.strip_suffix("/*")).any(|w| {
        p == w
            || [format!("{w}/"), format!("{w}["), format!("{w}{{")]
                .iter()
                .any(|x| p.starts_with(x))
    })
}

/// For every CRD and version both we and upstream serve, the field paths of the schemas are
/// the same (metadata aside, and below a schemaless object on either side), but for
/// [`KNOWN_FIELD_DIFFERENCES`]: a v1beta1 type that misspells or misses a field fails here.
#[test]
fn fields_as_upstream() {
    let bases = crds::openkruise_crd_dir().expect("OpenKruise v1.9 source");
    let upstream = crds_in(&bases);
    let ours = crds_in(&crds::our_crd_dir());
    let mut diffs = BTreeSet::new();
    for (name, (_, theirs)) in &upstream {
        let Some((_, mine)) = ours.get(name) else {
            continue;
        };
        for tv in &theirs.spec.versions {
            let Some(mv) = mine.spec.versions.iter().find(|v| v.name == tv.name) else {
                continue;
            };
            let paths = |v: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion| {
                let schema = serde_json::to_value(v.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()))
                    .unwrap_or(Value::Null);
                let mut out = BTreeSet::new();
                field_paths(&schema, "", &mut out);
                out.retain(|p| !["/apiVersion", "/kind", "/metadata"].contains(&p.as_str()));
                out
            };
            let (t, m) = (paths(tv), paths(mv));
            // A region one side keeps as written and the other types is not a difference.
            let compared = |p: &&String, other: &BTreeSet<String>| {
                !under_schemaless(p, other)
                    && !p
                        .strip_suffix("/*")
                        .is_some_and(|base| other.iter().any(|o| o.starts_with(base)))
            };
            for p in m.difference(&t).filter(|p| compared(p, &t)) {
                diffs.insert(format!("+ {name} {} {p}", tv.name));
            }
            for p in t.difference(&m).filter(|p| compared(p, &m)) {
                diffs.insert(format!("- {name} {} {p}", tv.name));
            }
        }
    }
    // A listed path covers what lies below it.
    let covers = |k: &str, d: &str| {
        d == k
            || ["/", "[", "{"]
                .iter()
                .any(|c| d.starts_with(&format!("{k}{c}")))
    };
    let new: Vec<&String> = diffs
        .iter()
        .filter(|d| !KNOWN_FIELD_DIFFERENCES.iter().any(|k| covers(k, d)))
        .collect();
    let gone: Vec<&&str> = KNOWN_FIELD_DIFFERENCES
        .iter()
        .filter(|k| !diffs.contains(**k))
        .collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "differences from upstream's schemas not listed: {new:#?}\nlisted but gone: {gone:#?}"
    );
}

fn crrs(client: &Client, ns: &str, version: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(keys::APPS_GROUP, version, "ContainerRecreateRequest"),
        "containerrecreaterequests",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn sts_alpha(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &statefulset::resource(keys::VERSION_V1ALPHA1),
    )
}

/// The stored versions of the CRD `name` on the cluster.
async fn stored_versions(client: &Client, name: &str) -> Vec<String> {
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(name)
        .await
        .expect("CRD");
    crd.status
        .and_then(|s| s.stored_versions)
        .unwrap_or_default()
}

/// The three objects' specs, read in v1beta1.
async fn specs(client: &Client, ns: &str) -> Vec<Value> {
    let cs = cloneset::api(client, ns)
        .get("web")
        .await
        .expect("CloneSet");
    let crr = crrs(client, ns, keys::VERSION_V1BETA1)
        .get("r")
        .await
        .expect("CRR");
    let sts = statefulset::api(client, ns)
        .get("db")
        .await
        .expect("StatefulSet");
    vec![
        cs.data["spec"].clone(),
        crr.data["spec"].clone(),
        sts.data["spec"].clone(),
    ]
}

/// The StatefulSet read in v1alpha1 (through the conversion webhook once ours are installed):
/// once the webhook answers (it needs its caBundle back after a CRD replace).
async fn sts_in_v1alpha1(client: &Client, ns: &str) -> DynamicObject {
    let api = sts_alpha(client, ns);
    wait_for(
        "StatefulSet db readable as v1alpha1",
        Duration::from_secs(60),
        || async { Ok(Some(api.get("db").await?)) },
    )
    .await
    .expect("v1alpha1 read")
}

/// Kruise-rs → OpenKruise v1.9 → Kruise-rs by replacing the CRDs, with objects in them.
#[tokio::test]
async fn serial_openkruise_crds_over_ours_and_ours_back_keep_the_objects() {
    let t0 = std::time::Instant::now();
    let step = |what: &str| eprintln!("[{:>5.1}s] {what}", t0.elapsed().as_secs_f64());
    let upstream_dir = crds::openkruise_crd_dir().expect("OpenKruise v1.9 source");
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-crd-versions")
        .await
        .expect("ns");

    // A CloneSet with Pods, a completed CRR on one of them, an Advanced StatefulSet with a field
    // only v1beta1 has.
    let cs_api = cloneset::api(&client, &ns.name);
    cs_api
        .create(
            &PostParams::default(),
            &cloneset::new("web", 2, "v1", json!({})).expect("cs"),
        )
        .await
        .expect("create CloneSet");
    statefulset::create_headless_service(&client, &ns.name, "db")
        .await
        .expect("service");
    let sts_api = statefulset::api(&client, &ns.name);
    sts_api
        .create(
            &PostParams::default(),
            &statefulset::new("db", 1, "v1", false, json!({"reserveOrdinals": [3]})).expect("sts"),
        )
        .await
        .expect("create StatefulSet");
    cloneset::wait_rolled_out(&cs_api, "web", 2, ROLLOUT)
        .await
        .expect("CloneSet rolled out");
    let pods: Api<Pod> = ns.api();
    let pod = cloneset::pods(&pods, "web").await.expect("pods")[0].name_any();
    let crr_api = crrs(&client, &ns.name, keys::VERSION_V1BETA1);
    let crr: DynamicObject = serde_json::from_value(json!({
        "apiVersion": keys::APPS_V1BETA1, "kind": "ContainerRecreateRequest",
        "metadata": {"name": "r"}, "spec": {"podName": pod, "containers": [{"name": "app"}]}
    }))
    .expect("crr");
    crr_api
        .create(&PostParams::default(), &crr)
        .await
        .expect("create CRR");
    wait_for("CRR r Completed", ROLLOUT, || async {
        let c = crr_api.get("r").await?;
        Ok((c.data["status"]["phase"] == "Completed").then_some(()))
    })
    .await
    .expect("CRR completed");
    statefulset::wait_rolled_out(&sts_api, "db", 1, ROLLOUT)
        .await
        .expect("StatefulSet rolled out");

    for (group, kind, plural, namespaced, obj) in beta_objects(&ns.name) {
        let obj: DynamicObject = serde_json::from_value(obj).expect("object");
        beta_api(&client, &ns.name, group, kind, plural, namespaced)
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("create {kind} in v1beta1: {e}"));
    }
    let beta_before = beta_specs(&client, &ns.name).await;
    // The manager has counted the budget under our CRDs: protectTotalReplicas, through v1alpha1.
    let budgets = beta_api(
        &client,
        &ns.name,
        keys::POLICY_GROUP,
        "PodUnavailableBudget",
        "podunavailablebudgets",
        true,
    );
    total_replicas(
        &budgets,
        2,
        "the budget's totalReplicas from protectTotalReplicas",
    )
    .await
    .expect("protectTotalReplicas counted");

    step("CloneSet, CRR and StatefulSet ready; one object of each v1beta1 kind");
    // Stored in upstream's storage version, and nothing else.
    for file in SWAPPED {
        let theirs = crds::read(&upstream_dir, file).expect("upstream CRD");
        let name = theirs.metadata.name.clone().unwrap_or_default();
        let storage = crds::storage_version(&theirs).expect("upstream storage version");
        assert_eq!(
            stored_versions(&client, &name).await,
            [storage],
            "{name}: status.storedVersions"
        );
    }
    // Our conversion webhook keeps what v1alpha1 cannot say across a v1alpha1 write.
    let alpha = sts_in_v1alpha1(&client, &ns.name).await;
    assert!(
        alpha.data["spec"].get("reserveOrdinals").is_none(),
        "{}",
        alpha.data["spec"]
    );
    let before = specs(&client, &ns.name).await;
    step("stored versions as upstream's; StatefulSet read as v1alpha1");

    // OpenKruise v1.9's CRDs over ours, as a user switching would apply them.
    step("replacing our CRDs with OpenKruise's");
    let guard = OursBack::new(SWAPPED);
    for file in SWAPPED {
        let theirs = crds::read(&upstream_dir, file).expect("upstream CRD");
        crds::replace(&client, &theirs)
            .await
            .unwrap_or_else(|e| panic!("OpenKruise's {file} refused over ours: {e}"));
    }
    assert_eq!(
        specs(&client, &ns.name).await,
        before,
        "objects under OpenKruise's CRDs"
    );
    assert_eq!(
        beta_specs(&client, &ns.name).await,
        beta_before,
        "v1beta1 objects under OpenKruise's CRDs"
    );
    sts_alpha(&client, &ns.name)
        .get("db")
        .await
        .expect("StatefulSet readable as v1alpha1 under OpenKruise's CRD");
    // Under OpenKruise's PUB CRD (no conversion) our manager reads the budget as v1alpha1
    // without its v1beta1-only fields, so it counts no `protectTotalReplicas` and writes a new
    // status: that write must keep the spec (it once dropped protectOperations and
    // protectTotalReplicas, as the status went through v1alpha1's schema).
    total_replicas(
        &budgets,
        0,
        "the manager's status write under OpenKruise's PUB CRD",
    )
    .await
    .expect("status written under OpenKruise's CRD");
    assert_eq!(
        beta_specs(&client, &ns.name).await,
        beta_before,
        "v1beta1 objects after the manager wrote under OpenKruise's CRDs"
    );

    step("OpenKruise's CRDs accepted, objects intact, the budget's status written");
    // And ours back over theirs.
    guard
        .restore(&client)
        .await
        .expect("our CRDs accepted over OpenKruise's");
    for file in SWAPPED {
        let ours = crds::read(&crds::our_crd_dir(), file).expect("our CRD");
        let name = ours.metadata.name.clone().unwrap_or_default();
        let storage = crds::storage_version(&ours)
            .expect("storage version")
            .to_owned();
        assert_eq!(stored_versions(&client, &name).await, [storage], "{name}");
    }
    assert_eq!(
        specs(&client, &ns.name).await,
        before,
        "objects under our CRDs again"
    );
    assert_eq!(
        beta_specs(&client, &ns.name).await,
        beta_before,
        "v1beta1 objects under our CRDs again"
    );

    step("our CRDs accepted over OpenKruise's, objects intact");
    // The conversion webhook answers again (the manager puts its caBundle back), and a write in
    // v1alpha1 keeps the v1beta1-only field.
    sts_in_v1alpha1(&client, &ns.name).await;
    sts_alpha(&client, &ns.name)
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {"written-as": "v1alpha1"}}})),
        )
        .await
        .expect("v1alpha1 write");
    let sts = sts_api.get("db").await.expect("StatefulSet");
    assert_eq!(
        sts.labels().get("written-as").map(String::as_str),
        Some("v1alpha1")
    );
    assert_eq!(
        sts.data["spec"]["reserveOrdinals"],
        json!([3]),
        "{}",
        sts.data["spec"]
    );
    assert!(
        !sts.annotations()
            .contains_key(keys::CLONESET_CONVERSION_ANNOTATION),
        "the conversion record is not stored: {:?}",
        sts.annotations()
    );

    // And the budget reads in v1alpha1 through our conversion again: its fields as annotations.
    let pub_alpha = wait_for(
        "the budget readable as v1alpha1",
        Duration::from_secs(60),
        || async {
            let ar = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(
                    keys::POLICY_GROUP,
                    keys::VERSION_V1ALPHA1,
                    "PodUnavailableBudget",
                ),
                "podunavailablebudgets",
            );
            Ok(Some(
                Api::<DynamicObject>::namespaced_with(client.clone(), &ns.name, &ar)
                    .get("pub")
                    .await?,
            ))
        },
    )
    .await
    .expect("v1alpha1 read");
    assert_eq!(
        pub_alpha
            .annotations()
            .get(keys::PUB_PROTECT_OPERATIONS_ANNOTATION)
            .map(String::as_str),
        Some("DELETE")
    );
    // ... and the manager counts its protectTotalReplicas again.
    total_replicas(
        &budgets,
        2,
        "the budget's totalReplicas from protectTotalReplicas again",
    )
    .await
    .expect("protectTotalReplicas counted again");

    step("conversion webhook answers again; a v1alpha1 write kept reserveOrdinals");
    // The manager still reconciles: one more replica, one more Pod.
    cloneset::patch_spec(&cs_api, "web", json!({"replicas": 3}))
        .await
        .expect("scale");
    cloneset::wait_rolled_out(&cs_api, "web", 3, ROLLOUT)
        .await
        .expect("CloneSet scaled after the round trip");
    assert_eq!(cloneset::pods(&pods, "web").await.expect("pods").len(), 3);
    step("CloneSet scaled to 3 by the manager");
    let rd = format!("{}-rd", ns.name);
    beta_api(
        &client,
        &ns.name,
        keys::APPS_GROUP,
        "ResourceDistribution",
        "resourcedistributions",
        false,
    )
    .delete(&rd, &Default::default())
    .await
    .expect("delete the ResourceDistribution");
    ns.delete().await.expect("delete ns");
}
