//! Moving between OpenKruise v1.9.0 (the release, tag v1.9.0) and Kruise-rs by swapping CRDs,
//! objects kept. Offline: our CRDs serve and store the versions the release's do and have its
//! fields, checked against the facts `hack/openkruise-facts.py` read from the tag
//! (`api/tests/data/openkruise-v1.9.0.json`). On the cluster, the way back for a cluster that
//! ran the build before the release's storage versions (v1beta1 stored for seven kinds): with
//! objects of all seven kinds, written in both versions under those CRDs, ours refuse nothing
//! but the release-shaped CRDs are refused until `kubectl kruise migrate storage` has run; after
//! it they apply, every object keeps every field, and ours apply again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_api::keys;
use kruise_e2e::crds::{self, CrdFacts, OursBack};
use kruise_e2e::{TestNamespace, client, cloneset, wait_for};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

const ROLLOUT: Duration = Duration::from_secs(180);

/// Our CRDs, by name, from `deploy/crds/`.
fn ours() -> BTreeMap<String, (String, CustomResourceDefinition)> {
    let dir = crds::our_crd_dir();
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("CRD directory") {
        let file = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if !file.ends_with(".yaml") {
            continue;
        }
        let crd = crds::read(&dir, &file).expect("CRD");
        out.insert(crd.metadata.name.clone().unwrap_or_default(), (file, crd));
    }
    out
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

/// Every CRD of the release we ship (all of them) serves at least the release's versions,
/// stores the release's storage version, and converts through the webhook where the release
/// does and wherever we serve a version the release lacks (v1beta1 of the seven kinds).
#[test]
fn versions_and_conversion_as_released() {
    let facts = crds::release_facts().expect("facts file");
    assert!(facts.commit.starts_with("b1e001a95"), "{}", facts.commit);
    let ours = ours();
    let mut wrong = Vec::new();
    for (name, theirs) in &facts.crds {
        let Some((file, mine)) = ours.get(name) else {
            wrong.push(format!("{name}: the release has it, we do not"));
            continue;
        };
        assert_eq!(file, &theirs.file, "{name}: file name");
        let their_served: BTreeSet<&str> = theirs
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| v.name.as_str())
            .collect();
        let extra = !served(mine).is_subset(&their_served);
        let converts = theirs.conversion == "Webhook" || extra;
        if !(served(mine).is_superset(&their_served)
            && crds::storage_version(mine) == theirs.storage()
            && (strategy(mine) == "Webhook") == converts)
        {
            wrong.push(format!(
                "{name}: ours serve {:?} store {:?} convert {}; the release serves {:?} stores {:?} \
                 converts {}",
                served(mine),
                crds::storage_version(mine),
                strategy(mine),
                their_served,
                theirs.storage(),
                theirs.conversion
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Field paths where our schema knowingly differs from the release's, as `crd version path`
/// (`+` we have it, the release has not; `-` the other way), each with its reason. Anything not
/// listed fails [`fields_as_released`]; a listed entry that no longer differs fails it too.
const KNOWN_FIELD_DIFFERENCES: &[&str] = &[
    // Ours: v1alpha1 reuses v1beta1's spec, so it also shows v1beta1's scaleStrategy (the
    // controller reads it in both; the release's v1alpha1 prunes it).
    "+ daemonsets.apps.kruise.io v1alpha1 /spec/scaleStrategy",
    // Ours: the SidecarSet's status keeps conditions (why an upgrade is blocked).
    "+ sidecarsets.apps.kruise.io v1alpha1 /status/conditions",
    "+ sidecarsets.apps.kruise.io v1beta1 /status/conditions",
    // Ours: a NodePodProbe entry names the PodProbeMarker it comes from.
    "+ nodepodprobes.apps.kruise.io v1alpha1 /spec/podProbes[]/probes[]/podProbeMarkerName",
    // Master's pre-download fields (the release reads the apps.kruise.io/image-predownload-*
    // annotations, which we read too): an extension, a release object means the same here.
    "+ clonesets.apps.kruise.io v1alpha1 /spec/updateStrategy/inPlaceUpdateStrategy/imagePreDownloadMinUpdatedReadyPods",
    "+ clonesets.apps.kruise.io v1alpha1 /spec/updateStrategy/inPlaceUpdateStrategy/imagePreDownloadParallelism",
    "+ clonesets.apps.kruise.io v1alpha1 /spec/updateStrategy/inPlaceUpdateStrategy/imagePreDownloadTimeoutSeconds",
    "+ statefulsets.apps.kruise.io v1alpha1 /spec/updateStrategy/rollingUpdate/inPlaceUpdateStrategy/imagePreDownloadMinUpdatedReadyPods",
    "+ statefulsets.apps.kruise.io v1alpha1 /spec/updateStrategy/rollingUpdate/inPlaceUpdateStrategy/imagePreDownloadParallelism",
    "+ statefulsets.apps.kruise.io v1alpha1 /spec/updateStrategy/rollingUpdate/inPlaceUpdateStrategy/imagePreDownloadTimeoutSeconds",
    "+ statefulsets.apps.kruise.io v1beta1 /spec/updateStrategy/rollingUpdate/inPlaceUpdateStrategy/imagePreDownloadMinUpdatedReadyPods",
    "+ statefulsets.apps.kruise.io v1beta1 /spec/updateStrategy/rollingUpdate/inPlaceUpdateStrategy/imagePreDownloadParallelism",
    "+ statefulsets.apps.kruise.io v1beta1 /spec/updateStrategy/rollingUpdate/inPlaceUpdateStrategy/imagePreDownloadTimeoutSeconds",
    "+ uniteddeployments.apps.kruise.io v1alpha1 /spec/template/advancedStatefulSetTemplate/spec/updateStrategy/rollingUpdate/inPlaceUpdateStrategy/imagePreDownloadMinUpdatedReadyPods",
    "+ uniteddeployments.apps.kruise.io v1alpha1 /spec/template/advancedStatefulSetTemplate/spec/updateStrategy/rollingUpdate/inPlaceUpdateStrategy/imagePreDownloadParallelism",
    "+ uniteddeployments.apps.kruise.io v1alpha1 /spec/template/advancedStatefulSetTemplate/spec/updateStrategy/rollingUpdate/inPlaceUpdateStrategy/imagePreDownloadTimeoutSeconds",
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

/// For every CRD and version both we and the release serve, the field paths of the schemas are
/// the same (metadata aside, and below a schemaless object on either side), but for
/// [`KNOWN_FIELD_DIFFERENCES`]: a type that misspells or misses a field fails here.
#[test]
fn fields_as_released() {
    let facts = crds::release_facts().expect("facts file");
    let ours = ours();
    let mut diffs = BTreeSet::new();
    for (name, theirs) in &facts.crds {
        let Some((_, mine)) = ours.get(name) else {
            continue;
        };
        for tv in &theirs.versions {
            let Some(mv) = mine.spec.versions.iter().find(|v| v.name == tv.name) else {
                continue;
            };
            let schema = serde_json::to_value(
                mv.schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref()),
            )
            .unwrap_or(Value::Null);
            let mut m = BTreeSet::new();
            field_paths(&schema, "", &mut m);
            m.retain(|p| {
                !["/apiVersion", "/kind", "/metadata"].contains(&p.as_str())
                    && !p.starts_with("/metadata/")
            });
            let t: BTreeSet<String> = tv.fields.iter().cloned().collect();
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
        "differences from the release's schemas not listed: {new:#?}\nlisted but gone: {gone:#?}"
    );
}

/// One object of the round trip: its CRD's facts, the version it is written in, its body.
struct Obj {
    crd: CrdFacts,
    version: &'static str,
    body: Value,
}

impl Obj {
    fn label(&self) -> String {
        format!(
            "{}/{} ({})",
            self.crd.kind,
            self.body["metadata"]["name"].as_str().unwrap_or_default(),
            self.version
        )
    }

    fn name(&self) -> &str {
        self.body["metadata"]["name"].as_str().unwrap_or_default()
    }

    fn api(&self, client: &Client, ns: &str, version: &str) -> Api<DynamicObject> {
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&self.crd.group, version, &self.crd.kind),
            &self.crd.plural,
        );
        if self.crd.namespaced {
            Api::namespaced_with(client.clone(), ns, &ar)
        } else {
            Api::all_with(client.clone(), &ar)
        }
    }
}

/// Objects of the five kinds without Pods to act on, each written once in v1beta1 (v1beta1's
/// field names) and once in v1alpha1 (v1alpha1's); they only need to be kept.
fn objects(facts: &BTreeMap<String, CrdFacts>, ns: &str) -> Vec<Obj> {
    let crd = |name: &str| facts.get(name).cloned().expect("in the facts");
    let term = json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z9"]}]});
    let body = |version: &str, kind: &str, name: &str, spec: Value| {
        json!({"apiVersion": format!("{}/{version}", if kind == "PodUnavailableBudget" {
                   keys::POLICY_GROUP } else { keys::APPS_GROUP }),
               "kind": kind, "metadata": {"name": name}, "spec": spec})
    };
    let (a, b) = (keys::VERSION_V1ALPHA1, keys::VERSION_V1BETA1);
    let ud_spec = |app: &str| {
        json!({"replicas": 0, "selector": {"matchLabels": {"app": app}},
            "template": {"cloneSetTemplate": {"metadata": {"labels": {"app": app}},
                "spec": {"selector": {"matchLabels": {"app": app}},
                    "template": {"metadata": {"labels": {"app": app}},
                        "spec": {"containers": [{"name": "c", "image": "none"}]}},
                    "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible",
                                                         "partition": 1}}}}},
            "topology": {"subsets": [{"name": "a", "nodeSelectorTerm": term}]}})
    };
    let mut pub_alpha = body(
        a,
        "PodUnavailableBudget",
        "pub-alpha",
        json!({"selector": {"matchLabels": {"app": "none-alpha"}}, "maxUnavailable": 1}),
    );
    pub_alpha["metadata"]["annotations"] =
        json!({keys::PUB_PROTECT_OPERATIONS_ANNOTATION: "DELETE"});
    let pps = "persistentpodstates.apps.kruise.io";
    let rd = "resourcedistributions.apps.kruise.io";
    let ud = "uniteddeployments.apps.kruise.io";
    let ws = "workloadspreads.apps.kruise.io";
    let pub_ = "podunavailablebudgets.policy.kruise.io";
    let cs = "clonesets.apps.kruise.io";
    let target = |kind: &str| json!({"apiVersion": "apps/v1", "kind": kind, "name": "none"});
    let rd_resource = |n: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}, "data": {"k": "v"}});
    vec![
        Obj {
            crd: crd(pps),
            version: b,
            body: body(
                b,
                "PersistentPodState",
                "pps",
                json!({"targetRef": target("StatefulSet"),
                   "requiredPersistentTopology": {"keys": ["kubernetes.io/hostname"]}}),
            ),
        },
        Obj {
            crd: crd(pps),
            version: a,
            body: body(
                a,
                "PersistentPodState",
                "pps-alpha",
                json!({"targetRef": json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "none-alpha"}),
                   "requiredPersistentTopology": {"nodeTopologyKeys": ["kubernetes.io/hostname"]},
                   "persistentPodStateRetentionPolicy": "WhenDeleted"}),
            ),
        },
        Obj {
            crd: crd(rd),
            version: b,
            body: body(
                b,
                "ResourceDistribution",
                &format!("{ns}-rd"),
                json!({"resource": rd_resource("rd"),
                   "targets": {"namespaceSelector": {"matchLabels": {"rd-of": ns}}}}),
            ),
        },
        Obj {
            crd: crd(rd),
            version: a,
            body: body(
                a,
                "ResourceDistribution",
                &format!("{ns}-rd-alpha"),
                json!({"resource": rd_resource("rd-alpha"),
                   "targets": {"namespaceLabelSelector": {"matchLabels": {"rd-alpha-of": ns}}}}),
            ),
        },
        Obj {
            crd: crd(ud),
            version: b,
            body: body(b, "UnitedDeployment", "ud", ud_spec("ud")),
        },
        Obj {
            crd: crd(ud),
            version: a,
            body: body(
                a,
                "UnitedDeployment",
                "ud-alpha",
                json!({"replicas": 0, "selector": {"matchLabels": {"app": "ud-alpha"}},
                "revisionHistoryLimit": 5,
                "template": {"cloneSetTemplate": {"metadata": {"labels": {"app": "ud-alpha"}},
                    "spec": {"selector": {"matchLabels": {"app": "ud-alpha"}},
                        "template": {"metadata": {"labels": {"app": "ud-alpha"}},
                            "spec": {"containers": [{"name": "c", "image": "none"}]}}}}},
                "topology": {"subsets": [{"name": "a", "nodeSelectorTerm": term}]}}),
            ),
        },
        Obj {
            crd: crd(ws),
            version: b,
            body: body(
                b,
                "WorkloadSpread",
                "ws",
                json!({"targetRef": {"apiVersion": keys::APPS_V1ALPHA1, "kind": "CloneSet", "name": "none"},
                   "subsets": [{"name": "a", "requiredNodeSelector": term, "maxReplicas": 1}]}),
            ),
        },
        Obj {
            crd: crd(ws),
            version: a,
            body: body(
                a,
                "WorkloadSpread",
                "ws-alpha",
                json!({"targetRef": {"apiVersion": keys::APPS_V1ALPHA1, "kind": "CloneSet", "name": "none-alpha"},
                   "subsets": [{"name": "a", "requiredNodeSelectorTerm": term, "maxReplicas": 1}]}),
            ),
        },
        Obj {
            crd: crd(pub_),
            version: b,
            body: body(
                b,
                "PodUnavailableBudget",
                "pub",
                json!({"selector": {"matchLabels": {"app": "none"}}, "maxUnavailable": 1,
                   "protectOperations": ["DELETE"], "protectTotalReplicas": 2}),
            ),
        },
        Obj {
            crd: crd(pub_),
            version: a,
            body: pub_alpha,
        },
        // A CloneSet written in v1alpha1 with v1alpha1's flat update strategy (no Pods).
        Obj {
            crd: crd(cs),
            version: a,
            body: body(
                a,
                "CloneSet",
                "web-alpha",
                json!({"replicas": 0, "selector": {"matchLabels": {"app": "web-alpha"}},
                "template": {"metadata": {"labels": {"app": "web-alpha"}},
                    "spec": {"containers": [{"name": "app", "image": "none"}]}},
                "scaleStrategy": {"disablePVCReuse": true},
                "updateStrategy": {"type": "InPlaceIfPossible", "partition": 1,
                                   "maxUnavailable": 1, "paused": true}}),
            ),
        },
    ]
}

/// What must survive: labels, annotations and spec of every object, read in `version`.
async fn snapshot(
    client: &Client,
    ns: &str,
    objs: &[Obj],
    version: &str,
) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for o in objs {
        let got = o
            .api(client, ns, version)
            .get(o.name())
            .await
            .unwrap_or_else(|e| panic!("{} read as {version}: {e}", o.label()));
        out.insert(
            o.label(),
            json!({"labels": got.labels(), "annotations": got.annotations(),
                   "spec": got.data["spec"]}),
        );
    }
    out
}

/// A snapshot once the controllers are done with the objects: two reads a second apart agree
/// (a controller's write after creation is not a change the migration made).
async fn settled_snapshot(
    client: &Client,
    ns: &str,
    objs: &[Obj],
    version: &str,
) -> BTreeMap<String, Value> {
    let mut last = snapshot(client, ns, objs, version).await;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = snapshot(client, ns, objs, version).await;
        if now == last {
            return now;
        }
        eprintln!("still changing: {}", differing(&last, &now).join(", "));
        last = now;
    }
    panic!("the objects did not settle in 30 s");
}

/// The objects of two snapshots that differ, each with what differs (for a readable failure).
fn differing(a: &BTreeMap<String, Value>, b: &BTreeMap<String, Value>) -> Vec<String> {
    a.keys()
        .chain(b.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("{k}: {:?} then {:?}", a.get(k), b.get(k)))
        .collect()
}

/// Fails naming only the objects that differ (a whole snapshot is too long to read).
fn assert_same(now: &BTreeMap<String, Value>, before: &BTreeMap<String, Value>, what: &str) {
    let diff = differing(before, now);
    assert!(diff.is_empty(), "{what}: changed\n{}", diff.join("\n"));
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

/// The earlier build (v1beta1 stored) → our CRDs → `kubectl kruise migrate storage` → the
/// release's CRDs (versions, storage and conversion from the facts) → ours again, with objects
/// of all seven kinds written in both versions, every field kept throughout.
#[tokio::test]
async fn serial_earlier_build_migrates_then_release_crds_and_ours_back_keep_the_objects() {
    let t0 = std::time::Instant::now();
    let step = |what: &str| eprintln!("[{:>5.1}s] {what}", t0.elapsed().as_secs_f64());
    let facts = crds::release_facts().expect("facts file");
    let ours = ours();
    // The seven: stored as v1alpha1 by the release, served in v1beta1 too by us.
    let seven: Vec<(String, String)> = facts
        .crds
        .iter()
        .filter(|(n, c)| {
            c.storage() == Some(keys::VERSION_V1ALPHA1)
                && ours.get(*n).is_some_and(|(_, o)| o.spec.versions.len() > 1)
        })
        .map(|(n, c)| (n.clone(), c.file.clone()))
        .collect();
    assert_eq!(seven.len(), 7, "{seven:?}");
    let files: Vec<&str> = seven.iter().map(|(_, f)| f.as_str()).collect();
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-crd-versions")
        .await
        .expect("ns");

    // The earlier build's CRDs: ours, storing v1beta1.
    let guard = OursBack::new(&files);
    for (name, _) in &seven {
        crds::replace(
            &client,
            &crds::storing(&ours[name].1, keys::VERSION_V1BETA1),
        )
        .await
        .unwrap_or_else(|e| panic!("{name} storing v1beta1: {e}"));
    }
    step("the earlier build's CRDs (v1beta1 stored) installed");

    // A CloneSet with Pods and a completed CRR on each (one written in each version), and the
    // other objects, all stored as v1beta1.
    let cs_api = cloneset::api(&client, &ns.name);
    cs_api
        .create(
            &PostParams::default(),
            &cloneset::new("web", 2, "v1", json!({})).expect("cs"),
        )
        .await
        .expect("create CloneSet");
    cloneset::wait_rolled_out(&cs_api, "web", 2, ROLLOUT)
        .await
        .expect("CloneSet rolled out");
    let pods: Api<Pod> = ns.api();
    let pod_names: Vec<String> = cloneset::pods(&pods, "web")
        .await
        .expect("pods")
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    let cs_facts = facts.crds["clonesets.apps.kruise.io"].clone();
    let crr_facts = facts.crds["containerrecreaterequests.apps.kruise.io"].clone();
    let mut objs = vec![Obj {
        crd: cs_facts,
        version: keys::VERSION_V1BETA1,
        body: json!({"metadata": {"name": "web"}}),
    }];
    for (i, version) in [keys::VERSION_V1BETA1, keys::VERSION_V1ALPHA1]
        .into_iter()
        .enumerate()
    {
        objs.push(Obj {
            crd: crr_facts.clone(),
            version,
            body: json!({"apiVersion": format!("{}/{version}", keys::APPS_GROUP),
                "kind": "ContainerRecreateRequest", "metadata": {"name": format!("r-{version}")},
                "spec": {"podName": pod_names[i], "containers": [{"name": "app"}]}}),
        });
    }
    objs.extend(objects(&facts.crds, &ns.name));
    for o in objs.iter().skip(1) {
        let obj: DynamicObject = serde_json::from_value(o.body.clone()).expect("object");
        o.api(&client, &ns.name, o.version)
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("create {}: {e}", o.label()));
    }
    for o in objs
        .iter()
        .filter(|o| o.crd.kind == "ContainerRecreateRequest")
    {
        let api = o.api(&client, &ns.name, o.version);
        // Finished as a user sees it: Completed, and the controller's last write (dropping
        // the active label) done, so that the snapshot below is not taken halfway.
        wait_for(&format!("{} Completed", o.label()), ROLLOUT, || async {
            let c = api.get(o.name()).await?;
            let active = c.labels().contains_key(keys::CRR_ACTIVE_LABEL);
            Ok((c.data["status"]["phase"] == "Completed" && !active).then_some(()))
        })
        .await
        .expect("CRR completed");
    }
    for (name, _) in &seven {
        let stored = stored_versions(&client, name).await;
        assert!(
            stored.iter().any(|v| v == keys::VERSION_V1BETA1),
            "{name}: storedVersions {stored:?}"
        );
    }
    let alpha0 = settled_snapshot(&client, &ns.name, &objs, keys::VERSION_V1ALPHA1).await;
    let beta0 = snapshot(&client, &ns.name, &objs, keys::VERSION_V1BETA1).await;
    step(&format!(
        "{} objects of the seven kinds stored as v1beta1",
        objs.len()
    ));

    // Our CRDs (v1alpha1 stored): accepted, but v1beta1 stays in storedVersions, so the
    // release's CRDs are refused until the migration.
    for (name, _) in &seven {
        crds::replace(&client, &ours[name].1)
            .await
            .unwrap_or_else(|e| panic!("our {name} over the earlier build's: {e}"));
    }
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (name, _) in &seven {
        let mut release = crds::release_shaped(&ours[name].1, &facts.crds[name]);
        let live = crd_api.get(name).await.expect("CRD");
        release.metadata.resource_version = live.metadata.resource_version;
        let dry = PostParams {
            dry_run: true,
            ..Default::default()
        };
        let refused = crd_api.replace(name, &dry, &release).await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(e)) if e.message.contains("storedVersions")),
            "{name}: the release's CRD over a v1beta1-stored one: {refused:?}"
        );
    }
    step("our CRDs installed; the release's refused while v1beta1 is stored");

    // The migration, then again (nothing left to do).
    let kk = kruise_e2e::cli::Kruise::new(&ns.name).expect("kubectl-kruise");
    let run = kk
        .run_for(&["migrate", "storage"], Duration::from_secs(120))
        .await
        .expect("run");
    eprintln!("{run}");
    assert_eq!(run.code, Some(0), "{run}");
    // Each object said: rewritten, or written by a controller since it was listed (which
    // stored it at v1alpha1 as well).
    for o in &objs {
        let line = if o.crd.namespaced {
            format!("{}/{}/{}: ", o.crd.kind, ns.name, o.name())
        } else {
            format!("{}/{}: ", o.crd.kind, o.name())
        };
        assert!(
            run.stdout.contains(&format!("{line}rewritten at v1alpha1"))
                || run.stdout.contains(&format!("{line}changed since listed")),
            "no `{line}` in\n{run}"
        );
    }
    for (name, _) in &seven {
        assert_eq!(
            stored_versions(&client, name).await,
            [keys::VERSION_V1ALPHA1],
            "{name}: storedVersions after the migration"
        );
        assert!(
            run.stdout
                .contains(&format!("{name}: stored versions [v1alpha1, v1beta1]"))
                || run
                    .stdout
                    .contains(&format!("{name}: stored versions [v1beta1, v1alpha1]")),
            "{name} not migrated:\n{run}"
        );
    }
    let again = kk
        .run_for(&["migrate", "storage"], Duration::from_secs(60))
        .await
        .expect("run");
    assert_eq!(again.code, Some(0), "{again}");
    assert!(!again.stdout.contains("rewritten at"), "{again}");
    assert!(
        again
            .stdout
            .contains("0 CRDs migrated, 0 objects rewritten"),
        "{again}"
    );
    assert_same(
        &snapshot(&client, &ns.name, &objs, keys::VERSION_V1ALPHA1).await,
        &alpha0,
        "v1alpha1 reads after the migration",
    );
    assert_same(
        &snapshot(&client, &ns.name, &objs, keys::VERSION_V1BETA1).await,
        &beta0,
        "v1beta1 reads after the migration",
    );
    step("migrated: storedVersions [v1alpha1] for all seven; a rerun rewrote nothing");

    // The release's CRDs (versions, storage, conversion from the facts): accepted, objects kept.
    for (name, _) in &seven {
        crds::replace(
            &client,
            &crds::release_shaped(&ours[name].1, &facts.crds[name]),
        )
        .await
        .unwrap_or_else(|e| panic!("the release's {name} refused after the migration: {e}"));
    }
    assert_same(
        &snapshot(&client, &ns.name, &objs, keys::VERSION_V1ALPHA1).await,
        &alpha0,
        "objects under the release's CRDs",
    );
    step("the release's CRDs accepted, every object and field kept");

    // And ours back: both versions read as before, through the webhook again.
    guard
        .restore(&client)
        .await
        .expect("our CRDs accepted over the release's");
    for (name, _) in &seven {
        assert_eq!(
            stored_versions(&client, name).await,
            [keys::VERSION_V1ALPHA1],
            "{name}"
        );
    }
    let beta = wait_for(
        "v1beta1 readable through the conversion webhook again",
        Duration::from_secs(60),
        || async {
            let mut out = BTreeMap::new();
            for o in &objs {
                let got = o
                    .api(&client, &ns.name, keys::VERSION_V1BETA1)
                    .get(o.name())
                    .await?;
                out.insert(
                    o.label(),
                    json!({"labels": got.labels(), "annotations": got.annotations(),
                           "spec": got.data["spec"]}),
                );
            }
            Ok(Some(out))
        },
    )
    .await
    .expect("v1beta1 reads");
    assert_same(&beta, &beta0, "v1beta1 reads under our CRDs again");
    assert_same(
        &snapshot(&client, &ns.name, &objs, keys::VERSION_V1ALPHA1).await,
        &alpha0,
        "v1alpha1 reads under our CRDs again",
    );
    step("our CRDs back, both versions read as before");

    // The manager still reconciles: one more replica, one more Pod.
    cloneset::patch_spec(&cs_api, "web", json!({"replicas": 3}))
        .await
        .expect("scale");
    cloneset::wait_rolled_out(&cs_api, "web", 3, ROLLOUT)
        .await
        .expect("CloneSet scaled after the round trip");
    assert_eq!(cloneset::pods(&pods, "web").await.expect("pods").len(), 3);
    step("CloneSet scaled to 3 by the manager");
    for o in objs.iter().filter(|o| !o.crd.namespaced) {
        o.api(&client, &ns.name, o.version)
            .delete(o.name(), &Default::default())
            .await
            .expect("delete the cluster-scoped object");
    }
    ns.delete().await.expect("delete ns");
}
