//! SidecarSet, end to end: injection into new Pods of a CloneSet and of a Deployment, in-place
//! sidecar upgrade on an image change within maxUnavailable and partition, no upgrade of
//! running Pods for other changes, the refusal of a conflicting SidecarSet, and hot upgrade (the
//! new version starts in the idle container of the pair before the old one is emptied).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::SidecarSet;
use kruise_api::keys;
use kruise_e2e::cli::Kruise;
use kruise_e2e::sidecarset::{self as sc, Guard};
use kruise_e2e::{TestNamespace, client, cloneset, container_status, image, pod_ready, wait_for};
use kube::api::{ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

const STARTUP: Duration = Duration::from_secs(180);
const UPGRADE: Duration = Duration::from_secs(240);

fn logger() -> serde_json::Value {
    json!({"name": "logger", "image": image("sidecar", "v1"),
        "volumeMounts": [{"name": "logs", "mountPath": "/logs"}],
        "transferEnv": [{"sourceContainerName": "app", "envName": "APP_MODE"}]})
}

async fn pods_of(api: &Api<Pod>, app: &str) -> Vec<Pod> {
    api.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

async fn ready_pods(api: &Api<Pod>, app: &str, n: usize) -> Vec<Pod> {
    wait_for(&format!("{n} ready {app} pods"), STARTUP, || async {
        let pods = pods_of(api, app).await;
        let ok = pods.len() == n && pods.iter().all(pod_ready);
        Ok(ok.then_some(pods))
    })
    .await
    .expect("pods ready")
}

#[tokio::test]
async fn injects_into_cloneset_and_deployment_pods_only_when_matched() {
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, "sc-inject")
        .await
        .expect("ns");
    let set = sc::new(
        &format!("{}-inject", ns.name),
        &ns.name,
        "web",
        json!({
            "containers": [logger(),
                {"name": "tail", "image": image("sidecar", "v1"), "podInjectPolicy": "AfterAppContainer"}],
            "volumes": [{"name": "logs", "emptyDir": {}}]
        }),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set)
        .await
        .expect("create sidecarset");

    let cs_api = cloneset::api(&client, &ns.name);
    let mut cs = cloneset::new("web", 1, "v1", json!({})).expect("cloneset");
    cs.data["spec"]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "APP_MODE", "value": "blue"}]);
    cs_api
        .create(&PostParams::default(), &cs)
        .await
        .expect("create cloneset");
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web-deploy"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web", "owner": "deploy"}},
            "template": {"metadata": {"labels": {"app": "web", "owner": "deploy"}},
                "spec": {"terminationGracePeriodSeconds": 5, "containers": [
                    {"name": "app", "image": image("testapp", "v1"),
                     "env": [{"name": "APP_MODE", "value": "green"}]}]}}}
    }))
    .expect("deployment");
    ns.api::<Deployment>()
        .create(&PostParams::default(), &deploy)
        .await
        .expect("create deployment");
    let other: Pod = serde_json::from_value(json!({
        "metadata": {"name": "other", "labels": {"app": "db"}},
        "spec": {"terminationGracePeriodSeconds": 5,
            "containers": [{"name": "app", "image": image("testapp", "v1")}]}
    }))
    .expect("pod");
    let pods: Api<Pod> = ns.api();
    pods.create(&PostParams::default(), &other)
        .await
        .expect("create other");

    let web = ready_pods(&pods, "web", 2).await;
    for p in &web {
        assert_eq!(
            sc::container_names(p),
            ["logger", "app", "tail"],
            "pod {}",
            p.name_any()
        );
        let mode = if p.labels().contains_key("owner") {
            "green"
        } else {
            "blue"
        };
        let env = sc::env(p, "logger");
        assert_eq!(
            env.get("APP_MODE").map(String::as_str),
            Some(mode),
            "{env:?}"
        );
        assert_eq!(
            env.get(keys::ENV_SIDECAR_IS_INJECTED).map(String::as_str),
            Some("true")
        );
        let vols: Vec<String> = p
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten().map(|v| v.name.clone()))
            .collect();
        assert!(vols.contains(&"logs".to_owned()), "{vols:?}");
        let ann = p.annotations();
        assert_eq!(
            ann.get(keys::SIDECARSET_INJECTED_LIST_ANNOTATION),
            set.metadata.name.as_ref()
        );
        assert!(ann.contains_key(keys::SIDECARSET_HASH_ANNOTATION));
        assert!(container_status(p, "logger").is_some_and(|s| s.ready));
    }
    let other = pods.get("other").await.expect("other");
    assert_eq!(sc::container_names(&other), ["app"]);
    assert!(
        !other
            .annotations()
            .contains_key(keys::SIDECARSET_HASH_ANNOTATION)
    );

    guard.delete().await.expect("delete sidecarset");
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn image_change_upgrades_in_place_within_max_unavailable_and_partition() {
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, "sc-upgrade")
        .await
        .expect("ns");
    let name = format!("{}-up", ns.name);
    let set = sc::new(
        &name,
        &ns.name,
        "web",
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v1")}],
            "updateStrategy": {"maxUnavailable": 1, "partition": 1}}),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set)
        .await
        .expect("create sidecarset");
    let cs_api = cloneset::api(&client, &ns.name);
    let cs = cloneset::new("web", 3, "v1", json!({})).expect("cloneset");
    cs_api
        .create(&PostParams::default(), &cs)
        .await
        .expect("create cloneset");
    let pods: Api<Pod> = ns.api();
    let before = ready_pods(&pods, "web", 3).await;
    let uids: BTreeMap<String, String> = before
        .iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect();
    let sets = sc::api(&client);
    wait_for("matchedPods 3", STARTUP, || async {
        let s = sets.get(&name).await?;
        Ok(s.status
            .filter(|st| st.matched_pods == 3 && st.updated_pods == 3)
            .map(|_| ()))
    })
    .await
    .expect("status before");

    sc::patch_spec(
        &sets,
        &name,
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v2")}]}),
    )
    .await
    .expect("set image");

    // Watch the rollout: never more than one Pod unready; it ends with exactly one held back.
    let v2 = image("sidecar", "v2");
    let mut max_unready = 0;
    let deadline = tokio::time::Instant::now() + UPGRADE;
    loop {
        let now = pods_of(&pods, "web").await;
        let unready = now.iter().filter(|p| !pod_ready(p)).count();
        max_unready = max_unready.max(unready);
        let upgraded = now
            .iter()
            .filter(|p| sc::spec_image(p, "logger").as_deref() == Some(v2.as_str()))
            .count();
        if upgraded == 2 && unready == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "rollout stuck: {upgraded} upgraded, {unready} unready"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(max_unready <= 1, "saw {max_unready} Pods unready at once");
    // The partition holds: the third stays on v1 for a while.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let now = pods_of(&pods, "web").await;
    let old: Vec<&Pod> = now
        .iter()
        .filter(|p| sc::spec_image(p, "logger").as_deref() == Some(image("sidecar", "v1").as_str()))
        .collect();
    assert_eq!(
        old.len(),
        1,
        "partition 1 keeps exactly one Pod on the old sidecar"
    );
    let s = sets.get(&name).await.expect("set");
    let st = s.status.expect("status");
    assert_eq!((st.matched_pods, st.updated_pods), (3, 2), "{st:?}");

    sc::patch_spec(&sets, &name, json!({"updateStrategy": {"partition": 0}}))
        .await
        .expect("partition 0");
    let after = wait_for("all 3 upgraded and ready", UPGRADE, || async {
        let now = pods_of(&pods, "web").await;
        let done = now.len() == 3
            && now.iter().all(|p| {
                pod_ready(p)
                    && container_status(p, "logger")
                        .is_some_and(|s| s.image.contains("sidecar:v2") && s.ready)
            });
        Ok(done.then_some(now))
    })
    .await
    .expect("rollout");
    for p in &after {
        assert_eq!(
            uids.get(&p.name_any()),
            p.uid().as_ref(),
            "same Pod {}",
            p.name_any()
        );
        let app = container_status(p, "app").expect("app status");
        assert_eq!(
            app.restart_count,
            0,
            "app container untouched in {}",
            p.name_any()
        );
        let logger = container_status(p, "logger").expect("logger status");
        assert_eq!(
            logger.restart_count,
            1,
            "sidecar restarted once in {}",
            p.name_any()
        );
    }
    wait_for("status updatedReadyPods 3", STARTUP, || async {
        let s = sets.get(&name).await?;
        Ok(s.status
            .filter(|st| st.updated_pods == 3 && st.updated_ready_pods == 3 && st.ready_pods == 3)
            .map(|_| ()))
    })
    .await
    .expect("final status");

    guard.delete().await.expect("delete sidecarset");
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn change_beyond_image_only_reaches_new_pods() {
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, "sc-env").await.expect("ns");
    let name = format!("{}-env", ns.name);
    let set = sc::new(
        &name,
        &ns.name,
        "web",
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v1")}],
            "updateStrategy": {"maxUnavailable": 2}}),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set)
        .await
        .expect("create sidecarset");
    let cs_api = cloneset::api(&client, &ns.name);
    let cs = cloneset::new("web", 2, "v1", json!({})).expect("cloneset");
    cs_api
        .create(&PostParams::default(), &cs)
        .await
        .expect("create cloneset");
    let pods: Api<Pod> = ns.api();
    let before = ready_pods(&pods, "web", 2).await;

    let sets = sc::api(&client);
    sc::patch_spec(
        &sets,
        &name,
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v2"),
            "env": [{"name": "LEVEL", "value": "debug"}]}]}),
    )
    .await
    .expect("change env and image");
    wait_for("status observes the change", STARTUP, || async {
        let s = sets.get(&name).await?;
        let g = s.metadata.generation.unwrap_or_default();
        Ok(s.status
            .filter(|st| {
                st.observed_generation == g && st.updated_pods == 0 && st.matched_pods == 2
            })
            .map(|_| ()))
    })
    .await
    .expect("status");
    tokio::time::sleep(Duration::from_secs(10)).await;
    for p in &before {
        let now = pods.get(&p.name_any()).await.expect("pod");
        assert_eq!(sc::spec_image(&now, "logger"), Some(image("sidecar", "v1")));
        assert!(!sc::env(&now, "logger").contains_key("LEVEL"));
        assert_eq!(
            container_status(&now, "logger").map(|s| s.restart_count),
            Some(0)
        );
    }
    cloneset::patch_spec(&cs_api, "web", json!({"replicas": 3}))
        .await
        .expect("scale");
    let all = ready_pods(&pods, "web", 3).await;
    let new: Vec<&Pod> = all
        .iter()
        .filter(|p| !before.iter().any(|b| b.uid() == p.uid()))
        .collect();
    assert_eq!(new.len(), 1);
    assert_eq!(
        sc::spec_image(new[0], "logger"),
        Some(image("sidecar", "v2"))
    );
    assert_eq!(
        sc::env(new[0], "logger").get("LEVEL").map(String::as_str),
        Some("debug")
    );

    guard.delete().await.expect("delete sidecarset");
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn conflicting_sidecarset_is_refused_naming_the_first() {
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, "sc-conflict")
        .await
        .expect("ns");
    let first_name = format!("{}-first", ns.name);
    let first = sc::new(
        &first_name,
        &ns.name,
        "web",
        json!({"containers": [{"name": "proxy", "image": image("sidecar", "v1")}]}),
    )
    .expect("first");
    let (guard, _) = Guard::create(&client, &first).await.expect("create first");
    let second = sc::new(
        &format!("{}-second", ns.name),
        &ns.name,
        "web",
        json!({"selector": {"matchLabels": {"app": "web", "tier": "front"}},
            "containers": [{"name": "proxy", "image": image("sidecar", "v2")}]}),
    )
    .expect("second");
    let err = sc::api(&client)
        .create(&PostParams::default(), &second)
        .await
        .expect_err("the second SidecarSet must be refused");
    let msg = err.to_string();
    assert!(msg.contains(&first_name), "{msg}");
    assert!(msg.contains("proxy"), "{msg}");
    // A field error names the field.
    let bad = sc::new(
        &format!("{}-bad", ns.name),
        &ns.name,
        "web",
        json!({"containers": [{"name": "x", "image": ""}]}),
    )
    .expect("bad");
    let err = sc::api(&client)
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("no image");
    assert!(
        err.to_string().contains("spec.containers[0].image"),
        "{err}"
    );

    guard.delete().await.expect("delete first");
    ns.delete().await.expect("delete ns");
}

/// Whether the container's status shows it running the given image, ready.
fn runs(pod: &Pod, container: &str, tag: &str) -> bool {
    container_status(pod, container).is_some_and(|s| {
        s.ready
            && s.image.ends_with(&format!("sidecar:{tag}"))
            && s.state.as_ref().is_some_and(|st| st.running.is_some())
    })
}

fn working(pod: &Pod) -> Option<String> {
    let v = pod
        .annotations()
        .get(keys::SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION)?;
    let m: BTreeMap<String, String> = serde_json::from_str(v).ok()?;
    m.get("proxy").cloned()
}

#[tokio::test]
async fn hot_upgrade_starts_the_new_version_before_emptying_the_old_one() {
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, "sc-hot").await.expect("ns");
    let name = format!("{}-hot", ns.name);
    let proxy = |tag: &str| {
        json!({"name": "proxy", "image": image("sidecar", tag),
            "upgradeStrategy": {"upgradeType": "HotUpgrade",
                "hotUpgradeEmptyImage": image("sidecar", "empty")}})
    };
    let set = sc::new(&name, &ns.name, "web", json!({"containers": [proxy("v1")]})).expect("set");
    let (guard, _) = Guard::create(&client, &set)
        .await
        .expect("create sidecarset");
    let cs_api = cloneset::api(&client, &ns.name);
    let cs = cloneset::new("web", 1, "v1", json!({})).expect("cloneset");
    cs_api
        .create(&PostParams::default(), &cs)
        .await
        .expect("create cloneset");
    let pods: Api<Pod> = ns.api();
    let pod = wait_for("the pair running, proxy-1 working", STARTUP, || async {
        let p = ready_pods(&pods, "web", 1).await.remove(0);
        let ok = runs(&p, "proxy-1", "v1")
            && runs(&p, "proxy-2", "empty")
            && working(&p).as_deref() == Some("proxy-1");
        Ok(ok.then_some(p))
    })
    .await
    .expect("injected pair");
    let uid = pod.uid();
    let pod_name = pod.name_any();
    let rv = pod.resource_version().unwrap_or_default();

    // Watch from the state just read, then change the image.
    let wp = WatchParams::default()
        .fields(&format!("metadata.name={pod_name}"))
        .timeout(290);
    let mut events = pods.watch(&wp, &rv).await.expect("watch pod").boxed();
    let sets = sc::api(&client);
    sc::patch_spec(&sets, &name, json!({"containers": [proxy("v2")]}))
        .await
        .expect("set image");

    let mut new_running_before_empty = None;
    let mut started = None;
    let v2 = image("sidecar", "v2");
    let annotation = |p: &Pod, key: &str| p.annotations().get(key).cloned();
    let mut seen = 0;
    let done = tokio::time::timeout(UPGRADE, async {
        while let Some(ev) = events.try_next().await.expect("watch stream") {
            let WatchEvent::Modified(p) = ev else {
                continue;
            };
            seen += 1;
            // At every moment one of the pair runs a real sidecar version.
            let serving = ["proxy-1", "proxy-2"]
                .iter()
                .any(|c| runs(&p, c, "v1") || runs(&p, c, "v2"));
            assert!(
                serving,
                "neither sidecar container runs the sidecar: {:?}",
                p.status.as_ref().and_then(|s| s.container_statuses.clone())
            );
            // Upstream's one update: proxy-2 gets v2 and becomes the working container, with
            // the versions its SIDECARSET_VERSION/_ALT read at start (the new one's version,
            // the SidecarSet's resourceVersion, and the older one's, "1" since injection).
            if started.is_none() && sc::spec_image(&p, "proxy-2").as_deref() == Some(v2.as_str()) {
                started = Some((
                    working(&p),
                    annotation(&p, "version.sidecarset.kruise.io/proxy-2"),
                    annotation(&p, "versionalt.sidecarset.kruise.io/proxy-2"),
                    annotation(&p, "versionalt.sidecarset.kruise.io/proxy-1"),
                ));
            }
            // The first time proxy-1 is set to the empty image, proxy-2 must already run v2.
            if new_running_before_empty.is_none()
                && sc::spec_image(&p, "proxy-1").as_deref()
                    == Some(image("sidecar", "empty").as_str())
            {
                new_running_before_empty = Some(runs(&p, "proxy-2", "v2"));
            }
            if working(&p).as_deref() == Some("proxy-2")
                && runs(&p, "proxy-2", "v2")
                && runs(&p, "proxy-1", "empty")
            {
                return p;
            }
        }
        panic!("watch ended before the hot upgrade finished");
    })
    .await
    .expect("hot upgrade finished in time");
    assert!(seen > 1, "the watch saw the upgrade step by step");
    assert_eq!(
        new_running_before_empty,
        Some(true),
        "proxy-2 ran v2 before proxy-1 was switched to the empty image"
    );
    assert_eq!(done.uid(), uid, "same Pod");
    assert_eq!(working(&done).as_deref(), Some("proxy-2"));
    let (working_at_start, version, alt, older_alt) = started.expect("proxy-2 got v2");
    assert_eq!(
        working_at_start.as_deref(),
        Some("proxy-2"),
        "the working container moves in the same update as the new image"
    );
    let version = version.expect("version of proxy-2");
    assert!(
        version.parse::<u64>().is_ok_and(|v| v > 1),
        "the SidecarSet's resourceVersion: {version}"
    );
    assert_eq!(
        alt.as_deref(),
        Some("1"),
        "proxy-2's alternate: proxy-1's version"
    );
    assert_eq!(
        older_alt,
        Some(version.clone()),
        "proxy-1's alternate: the new version"
    );
    // The reset: the emptied container's version and the working one's alternate go to "0".
    assert_eq!(
        annotation(&done, "version.sidecarset.kruise.io/proxy-1").as_deref(),
        Some("0")
    );
    assert_eq!(
        annotation(&done, "versionalt.sidecarset.kruise.io/proxy-2").as_deref(),
        Some("0")
    );
    assert_eq!(
        container_status(&done, "app").map(|s| s.restart_count),
        Some(0),
        "app container untouched"
    );
    wait_for("status updated 1, updatedReady 1", STARTUP, || async {
        let s = sets.get(&name).await?;
        Ok(s.status
            .filter(|st| st.matched_pods == 1 && st.updated_pods == 1 && st.updated_ready_pods == 1)
            .map(|_| ()))
    })
    .await
    .expect("final status");

    // `kubectl kruise exec -S proxy` enters the working container: the one started with the
    // new version, whose SIDECARSET_VERSION is the one proxy-2 carries.
    let kk = Kruise::new(&ns.name).expect("kubectl-kruise");
    let run = kk
        .run(&[
            "exec",
            &pod_name,
            "-S",
            "proxy",
            "--",
            "sh",
            "-c",
            "echo $SIDECARSET_VERSION",
        ])
        .await
        .expect("exec -S");
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(run.stdout.trim(), version, "{run}");
    assert!(
        run.stderr
            .contains("Enter working container proxy-2 of SidecarSet."),
        "{run}"
    );
    // Input reaches the command, and its exit code comes back.
    let run = kk
        .run_with_input(
            &[
                "exec",
                "cloneset/web",
                "-S",
                "proxy",
                "-i",
                "--",
                "sh",
                "-c",
                "cat; exit 7",
            ],
            "through stdin\n",
        )
        .await
        .expect("exec -i");
    assert_eq!(run.code, Some(7), "{run}");
    assert_eq!(run.stdout, "through stdin\n", "{run}");
    let run = kk
        .run(&["exec", &pod_name, "-S", "mesh", "--", "true"])
        .await
        .expect("exec -S unknown");
    assert_eq!(run.code, Some(2), "{run}");
    assert!(
        run.stderr.contains("hot-upgrade sidecars: [\"proxy\"]"),
        "{run}"
    );

    guard.delete().await.expect("delete sidecarset");
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn namespace_selector_limits_the_upgrade_to_the_labelled_namespace() {
    let client = client().await.expect("client");
    let a = TestNamespace::create(&client, "sc-ns-a")
        .await
        .expect("ns a");
    let b = TestNamespace::create(&client, "sc-ns-b")
        .await
        .expect("ns b");
    // A label of the namespaces (not their name), unique to this test run.
    let mesh = "kruise-e2e/sidecar-mesh";
    for ns in [&a.name, &b.name] {
        sc::label_namespace(&client, ns, json!({ mesh: a.name }))
            .await
            .expect("label namespace");
    }
    let name = format!("{}-nssel", a.name);
    // The conflict check cannot prove a label selector of namespaces disjoint from the other
    // tests' SidecarSets, so this one injects a container name of its own.
    let set = sc::new(
        &name,
        &a.name,
        "web",
        json!({"namespaceSelector": {"matchLabels": {
                keys::k8s::NAMESPACE_NAME_LABEL: null, mesh: a.name}},
            "containers": [{"name": "mesh-logger", "image": image("sidecar", "v1")}],
            "updateStrategy": {"maxUnavailable": 2}}),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set)
        .await
        .expect("create sidecarset");
    for ns in [&a.name, &b.name] {
        let cs = cloneset::new("web", 1, "v1", json!({})).expect("cloneset");
        cloneset::api(&client, ns)
            .create(&PostParams::default(), &cs)
            .await
            .expect("create cloneset");
    }
    let (pods_a, pods_b): (Api<Pod>, Api<Pod>) = (a.api(), b.api());
    let before_a = ready_pods(&pods_a, "web", 1).await.remove(0);
    let before_b = ready_pods(&pods_b, "web", 1).await.remove(0);
    for p in [&before_a, &before_b] {
        assert_eq!(
            sc::container_names(p),
            ["mesh-logger", "app"],
            "both injected"
        );
    }
    let sets = sc::api(&client);
    wait_for("matchedPods 2", STARTUP, || async {
        let s = sets.get(&name).await?;
        Ok(s.status.filter(|st| st.matched_pods == 2).map(|_| ()))
    })
    .await
    .expect("both matched");

    // Namespace b leaves the mesh: the controller stops counting its Pod.
    sc::label_namespace(&client, &b.name, json!({ mesh: null }))
        .await
        .expect("unlabel b");
    wait_for("matchedPods 1 after the label went", STARTUP, || async {
        let s = sets.get(&name).await?;
        Ok(s.status.filter(|st| st.matched_pods == 1).map(|_| ()))
    })
    .await
    .expect("only a matched");

    sc::patch_spec(
        &sets,
        &name,
        json!({"containers": [{"name": "mesh-logger", "image": image("sidecar", "v2")}]}),
    )
    .await
    .expect("set image");
    let after_a = wait_for("the sidecar in a on v2", UPGRADE, || async {
        let p = pods_a.get(&before_a.name_any()).await?;
        Ok(container_status(&p, "mesh-logger")
            .is_some_and(|s| s.ready && s.image.contains("sidecar:v2"))
            .then_some(p))
    })
    .await
    .expect("a upgraded");
    assert_eq!(after_a.uid(), before_a.uid(), "same Pod in a");
    assert_eq!(
        container_status(&after_a, "mesh-logger").map(|s| s.restart_count),
        Some(1)
    );
    // The Pod in b stays on v1, untouched.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let now_b = pods_b.get(&before_b.name_any()).await.expect("b pod");
    assert_eq!(
        sc::spec_image(&now_b, "mesh-logger"),
        Some(image("sidecar", "v1"))
    );
    assert_eq!(
        container_status(&now_b, "mesh-logger").map(|s| s.restart_count),
        Some(0),
        "the sidecar in b never restarted"
    );
    let st = sets.get(&name).await.expect("set").status.expect("status");
    assert_eq!((st.matched_pods, st.updated_pods), (1, 1), "{st:?}");
    // Injection uses the same matcher: a new Pod in b gets no sidecar.
    cloneset::patch_spec(
        &cloneset::api(&client, &b.name),
        "web",
        json!({"replicas": 2}),
    )
    .await
    .expect("scale b");
    let all_b = ready_pods(&pods_b, "web", 2).await;
    let new_b: Vec<&Pod> = all_b.iter().filter(|p| p.uid() != before_b.uid()).collect();
    assert_eq!(new_b.len(), 1);
    assert_eq!(sc::container_names(new_b[0]), ["app"]);

    guard.delete().await.expect("delete sidecarset");
    a.delete().await.expect("delete ns a");
    b.delete().await.expect("delete ns b");
}

/// When the Ready condition of the Pod last changed.
fn ready_since(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0.to_string())
}

#[tokio::test]
async fn priority_strategy_upgrades_the_heavier_pods_first() {
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, "sc-prio").await.expect("ns");
    let name = format!("{}-prio", ns.name);
    let set = sc::new(
        &name,
        &ns.name,
        "web",
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v1")}],
            "updateStrategy": {"maxUnavailable": 1, "priorityStrategy": {"weightPriority": [
                {"weight": 100, "matchSelector": {"matchLabels": {"tier": "canary"}}},
                {"weight": 50, "matchSelector": {"matchLabels": {"tier": "middle"}}}]}}}),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set)
        .await
        .expect("create sidecarset");
    let cs_api = cloneset::api(&client, &ns.name);
    let cs = cloneset::new("web", 3, "v1", json!({})).expect("cloneset");
    cs_api
        .create(&PostParams::default(), &cs)
        .await
        .expect("create cloneset");
    let pods: Api<Pod> = ns.api();
    let mut before = ready_pods(&pods, "web", 3).await;
    // The canary is the Pod the default order would upgrade last (ready longest, last name),
    // so only the priority can put it first.
    before.sort_by_key(|p| (ready_since(p), std::cmp::Reverse(p.name_any())));
    let order: Vec<String> = before.iter().map(ResourceExt::name_any).collect();
    for (pod, tier) in order.iter().zip(["canary", "middle"]) {
        pods.patch(
            pod,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {"tier": tier}}})),
        )
        .await
        .expect("label pod");
    }
    let sets = sc::api(&client);
    wait_for("matchedPods 3", STARTUP, || async {
        let s = sets.get(&name).await?;
        Ok(s.status.filter(|st| st.matched_pods == 3).map(|_| ()))
    })
    .await
    .expect("matched");

    sc::patch_spec(
        &sets,
        &name,
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v2")}]}),
    )
    .await
    .expect("set image");
    let v2 = image("sidecar", "v2");
    let mut seen: Vec<String> = Vec::new();
    let mut max_unready = 0;
    let deadline = tokio::time::Instant::now() + UPGRADE;
    while seen.len() < 3 {
        let now = pods_of(&pods, "web").await;
        max_unready = max_unready.max(now.iter().filter(|p| !pod_ready(p)).count());
        let mut fresh: Vec<String> = now
            .iter()
            .filter(|p| sc::spec_image(p, "logger").as_deref() == Some(v2.as_str()))
            .map(ResourceExt::name_any)
            .filter(|n| !seen.contains(n))
            .collect();
        assert!(
            fresh.len() <= 1,
            "maxUnavailable 1 upgrades one Pod at a time, saw {fresh:?} at once"
        );
        seen.append(&mut fresh);
        assert!(
            tokio::time::Instant::now() < deadline,
            "rollout stuck after {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(seen, order, "canary, then middle, then the rest");
    assert!(max_unready <= 1, "saw {max_unready} Pods unready at once");
    wait_for("all updated and ready", UPGRADE, || async {
        let s = sets.get(&name).await?;
        Ok(s.status
            .filter(|st| st.updated_pods == 3 && st.updated_ready_pods == 3)
            .map(|_| ()))
    })
    .await
    .expect("final status");

    guard.delete().await.expect("delete sidecarset");
    ns.delete().await.expect("delete ns");
}

fn blocked_condition(s: &SidecarSet) -> Option<(String, String)> {
    s.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == keys::SIDECARSET_CONDITION_POD_UPGRADE_BLOCKED)
        .map(|c| (c.status.clone(), c.message.clone()))
}

#[tokio::test]
async fn a_pod_that_cannot_be_upgraded_is_reported_and_the_others_go_on() {
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, "sc-blocked")
        .await
        .expect("ns");
    let name = format!("{}-blk", ns.name);
    let set = sc::new(
        &name,
        &ns.name,
        "web",
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v1")}],
            "updateStrategy": {"maxUnavailable": 2}}),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set)
        .await
        .expect("create sidecarset");
    let cs_api = cloneset::api(&client, &ns.name);
    let cs = cloneset::new("web", 2, "v1", json!({})).expect("cloneset");
    cs_api
        .create(&PostParams::default(), &cs)
        .await
        .expect("create cloneset");
    let pods: Api<Pod> = ns.api();
    let before = ready_pods(&pods, "web", 2).await;
    let (bad, good) = (before[0].name_any(), before[1].name_any());
    // An in-place state the controller cannot read: it must not guess over it.
    let state = keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION;
    pods.patch(
        &bad,
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"annotations": {state: "not json"}}})),
    )
    .await
    .expect("corrupt the annotation");
    let sets = sc::api(&client);
    sc::patch_spec(
        &sets,
        &name,
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v2")}]}),
    )
    .await
    .expect("set image");

    wait_for("the other Pod upgraded", UPGRADE, || async {
        let p = pods.get(&good).await?;
        Ok(container_status(&p, "logger")
            .is_some_and(|s| s.ready && s.image.contains("sidecar:v2"))
            .then_some(()))
    })
    .await
    .expect("good upgraded");
    let (status, message) = wait_for("the blocked condition", STARTUP, || async {
        let s = sets.get(&name).await?;
        Ok(blocked_condition(&s).filter(|(st, _)| st == "True"))
    })
    .await
    .expect("condition");
    assert_eq!(status, "True");
    assert!(message.contains(&bad), "{message}");
    assert!(message.contains(state), "{message}");
    let notes = wait_for("a Warning Event naming the Pod", STARTUP, || async {
        let n = sc::event_notes(&client, &name, keys::SIDECARSET_REASON_UPGRADE_FAILED).await?;
        Ok(n.iter().any(|m| m.contains(&bad)).then_some(n))
    })
    .await
    .expect("warning event");
    assert!(!notes.iter().any(|m| m.contains(&good)), "{notes:?}");
    let upgraded = sc::event_notes(&client, &name, keys::SIDECARSET_REASON_UPGRADE)
        .await
        .expect("events");
    assert!(upgraded.iter().any(|m| m.contains(&good)), "{upgraded:?}");
    let p = pods.get(&bad).await.expect("bad pod");
    assert_eq!(sc::spec_image(&p, "logger"), Some(image("sidecar", "v1")));

    // Fixed by hand: the Pod upgrades and the condition clears.
    pods.patch(
        &bad,
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"annotations": {state: null}}})),
    )
    .await
    .expect("fix the annotation");
    wait_for("the fixed Pod upgraded", UPGRADE, || async {
        let p = pods.get(&bad).await?;
        Ok(container_status(&p, "logger")
            .is_some_and(|s| s.ready && s.image.contains("sidecar:v2"))
            .then_some(()))
    })
    .await
    .expect("bad upgraded");
    wait_for("the condition False", STARTUP, || async {
        let s = sets.get(&name).await?;
        Ok(blocked_condition(&s)
            .filter(|(st, _)| st == "False")
            .map(|_| ()))
    })
    .await
    .expect("condition cleared");

    guard.delete().await.expect("delete sidecarset");
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn revisions_are_recorded_and_injection_can_pin_an_old_one() {
    use k8s_openapi::api::apps::v1::ControllerRevision;
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, "sc-rev").await.expect("ns");
    let name = format!("{}-rev", ns.name);
    // Paused upgrades: the pinned Pods must keep the old sidecar for the test's length.
    let set = sc::new(
        &name,
        &ns.name,
        "web",
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v1")}],
            "updateStrategy": {"paused": true}}),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set)
        .await
        .expect("create sidecarset");
    let sets = sc::api(&client);
    let latest = |want_not: Option<String>| {
        let sets = sets.clone();
        let name = name.clone();
        async move {
            wait_for("status.latestRevision", STARTUP, || async {
                let s = sets.get(&name).await?;
                Ok(s.status
                    .map(|st| st.latest_revision)
                    .filter(|r| !r.is_empty() && Some(r) != want_not.as_ref()))
            })
            .await
            .expect("latestRevision")
        }
    };
    let rev1 = latest(None).await;
    // Where the running manager keeps them (dev mode: its POD_NAMESPACE; in cluster: its
    // Pods' namespace), not where we assume it does.
    let manager_ns = kruise_e2e::mode::manager_namespace(&client)
        .await
        .expect("manager namespace");
    let revs: Api<ControllerRevision> = Api::namespaced(client.clone(), &manager_ns);
    let r1 = revs.get(&rev1).await.expect("revision object");
    // A Normal Event names the created revision, as the workloads' do.
    wait_for("a RevisionCreated Event", STARTUP, || async {
        let notes = sc::event_notes(&client, &name, keys::REASON_REVISION_CREATED).await?;
        Ok(notes.iter().any(|n| n.contains(&rev1)).then_some(()))
    })
    .await
    .expect("RevisionCreated Event");
    assert_eq!(
        r1.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(keys::SIDECARSET_NAME_LABEL)),
        Some(&name)
    );
    let data = r1.data.as_ref().map(|d| d.0.clone()).expect("data");
    assert_eq!(
        data["spec"]["containers"][0]["image"],
        json!(image("sidecar", "v1"))
    );

    // A pin to a revision that does not exist is refused, naming the field.
    let missing = format!("{name}-missing");
    let refused = sc::patch_spec(
        &sets,
        &name,
        json!({"injectionStrategy": {"revision": {"revisionName": missing}}}),
    )
    .await
    .expect_err("a pin to a missing revision is refused");
    let msg = refused.to_string();
    assert!(
        msg.contains("spec.injectionStrategy.revision.revisionName: Not found")
            && msg.contains(&missing),
        "{msg}"
    );
    let refused = sc::patch_spec(
        &sets,
        &name,
        json!({"injectionStrategy": {"revision": {"customVersion": "no-such-version"}}}),
    )
    .await
    .expect_err("a pin to a missing custom version is refused");
    assert!(
        refused
            .to_string()
            .contains("spec.injectionStrategy.revision.customVersion: Not found"),
        "{refused}"
    );

    sc::patch_spec(
        &sets,
        &name,
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v2")}],
            "injectionStrategy": {"revision": {"revisionName": rev1, "policy": "Always"}}}),
    )
    .await
    .expect("new image, injection pinned");
    let rev2 = latest(Some(rev1.clone())).await;
    revs.get(&rev2).await.expect("second revision");
    let listed = revs
        .list(&ListParams::default().labels(&format!("{}={name}", keys::SIDECARSET_NAME_LABEL)))
        .await
        .expect("list");
    assert_eq!(listed.items.len(), 2, "one revision per spec");

    let cs_api = cloneset::api(&client, &ns.name);
    let cs = cloneset::new("web", 1, "v1", json!({})).expect("cloneset");
    cs_api
        .create(&PostParams::default(), &cs)
        .await
        .expect("create cloneset");
    let pods: Api<Pod> = ns.api();
    let first = ready_pods(&pods, "web", 1).await.remove(0);
    assert_eq!(
        sc::spec_image(&first, "logger"),
        Some(image("sidecar", "v1")),
        "the pinned revision's image"
    );
    let entry: serde_json::Value = serde_json::from_str(
        first
            .annotations()
            .get(keys::SIDECARSET_HASH_ANNOTATION)
            .expect("hash annotation"),
    )
    .expect("json");
    assert_eq!(entry[&name]["controllerRevision"], json!(rev1));

    // Partial: the Pods the update selector leaves out get the pinned revision, the selected
    // ones the latest (a dry-run create shows what the webhook injects).
    sc::patch_spec(
        &sets,
        &name,
        json!({"updateStrategy": {"paused": false,
                "selector": {"matchLabels": {"canary": "true"}}},
            "injectionStrategy": {"revision": {"revisionName": rev1, "policy": "Partial"}}}),
    )
    .await
    .expect("partial pin");
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    for (canary, want) in [(false, "v1"), (true, "v2")] {
        let mut labels = json!({"app": "web"});
        if canary {
            labels["canary"] = json!("true");
        }
        let bare: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("bare-{canary}"), "labels": labels},
            "spec": {"containers": [{"name": "app", "image": image("testapp", "v1")}]}
        }))
        .expect("pod");
        let created = pods.create(&dry, &bare).await.expect("dry-run pod");
        assert_eq!(
            sc::spec_image(&created, "logger"),
            Some(image("sidecar", want)),
            "canary={canary}"
        );
    }

    // Unpinned: new Pods get the latest.
    sc::patch_spec(
        &sets,
        &name,
        json!({"injectionStrategy": {"revision": null}}),
    )
    .await
    .expect("unpin");
    cloneset::patch_spec(&cs_api, "web", json!({"replicas": 2}))
        .await
        .expect("scale");
    let all = ready_pods(&pods, "web", 2).await;
    let second = all
        .iter()
        .find(|p| p.uid() != first.uid())
        .expect("new pod");
    assert_eq!(
        sc::spec_image(second, "logger"),
        Some(image("sidecar", "v2"))
    );

    guard.delete().await.expect("delete sidecarset");
    ns.delete().await.expect("delete ns");
}

/// Upstream defaulting: an init container's `podInjectPolicy` becomes `AfterAppContainer` and a
/// container's `BeforeAppContainer` on the stored SidecarSet, and an injected init container
/// lands after the Pod's own.
#[tokio::test]
async fn init_container_inject_policy_defaults_to_after_app_container() {
    use kruise_api::apps::v1beta1::PodInjectPolicyType;
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, "sc-defaults")
        .await
        .expect("ns");
    let name = format!("{}-defaults", ns.name);
    let set = sc::new(
        &name,
        &ns.name,
        "web",
        json!({"initContainers": [{"name": "setup", "image": image("sidecar", "v1"),
                "command": ["true"]}],
            "containers": [{"name": "logger", "image": image("sidecar", "v1")}]}),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set)
        .await
        .expect("create sidecarset");
    let stored = sc::api(&client)
        .get(&name)
        .await
        .expect("stored sidecarset");
    assert_eq!(
        stored.spec.init_containers[0].pod_inject_policy,
        Some(PodInjectPolicyType::AfterAppContainer)
    );
    assert_eq!(
        stored.spec.containers[0].pod_inject_policy,
        Some(PodInjectPolicyType::BeforeAppContainer)
    );

    let pods: Api<Pod> = ns.api();
    let bare: Pod = serde_json::from_value(json!({
        "metadata": {"name": "bare", "labels": {"app": "web"}},
        "spec": {"initContainers": [{"name": "own", "image": image("testapp", "v1"),
                "command": ["true"]}],
            "containers": [{"name": "app", "image": image("testapp", "v1")}]}
    }))
    .expect("pod");
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    // The webhook's SidecarSet cache may lag the create by a moment.
    let inits = wait_for(
        "injection into a dry-run Pod",
        Duration::from_secs(30),
        || async {
            let created = pods.create(&dry, &bare).await?;
            let names: Vec<String> = created
                .spec
                .iter()
                .flat_map(|s| s.init_containers.iter().flatten().map(|c| c.name.clone()))
                .collect();
            Ok((names.len() == 2).then_some(names))
        },
    )
    .await
    .expect("injected");
    assert_eq!(inits, ["own", "setup"]);

    guard.delete().await.expect("delete sidecarset");
    ns.delete().await.expect("delete ns");
}

/// The `kruise.io/sidecarset-hash` entry of a Pod for SidecarSet `name`.
fn hash_entry(pod: &Pod, name: &str) -> serde_json::Value {
    pod.annotations()
        .get(keys::SIDECARSET_HASH_ANNOTATION)
        .and_then(|v| serde_json::from_str::<serde_json::Value>(v).ok())
        .map(|m| m[name].clone())
        .unwrap_or_default()
}

/// A Pod injected from a pinned revision and then upgraded in place to the current spec
/// records the current ControllerRevision in its hash entry (upstream
/// `UpdatePodSidecarSetHash`), not the pinned one.
#[tokio::test]
async fn upgrade_from_a_pinned_revision_records_the_latest_revision() {
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, "sc-repin")
        .await
        .expect("ns");
    let name = format!("{}-repin", ns.name);
    let set = sc::new(
        &name,
        &ns.name,
        "web",
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v1")}],
            "updateStrategy": {"paused": true}}),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set)
        .await
        .expect("create sidecarset");
    let sets = sc::api(&client);
    let latest_not = |old: Option<String>| {
        let sets = sets.clone();
        let name = name.clone();
        async move {
            wait_for("status.latestRevision", STARTUP, || async {
                let s = sets.get(&name).await?;
                Ok(s.status
                    .map(|st| st.latest_revision)
                    .filter(|r| !r.is_empty() && Some(r) != old.as_ref()))
            })
            .await
            .expect("latestRevision")
        }
    };
    let rev1 = latest_not(None).await;
    sc::patch_spec(
        &sets,
        &name,
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v2")}],
            "injectionStrategy": {"revision": {"revisionName": rev1, "policy": "Always"}}}),
    )
    .await
    .expect("new image, injection pinned");
    let rev2 = latest_not(Some(rev1.clone())).await;

    let cs_api = cloneset::api(&client, &ns.name);
    let cs = cloneset::new("web", 1, "v1", json!({})).expect("cloneset");
    cs_api
        .create(&PostParams::default(), &cs)
        .await
        .expect("create cloneset");
    let pods: Api<Pod> = ns.api();
    let pinned = ready_pods(&pods, "web", 1).await.remove(0);
    assert_eq!(
        sc::spec_image(&pinned, "logger"),
        Some(image("sidecar", "v1"))
    );
    assert_eq!(
        hash_entry(&pinned, &name)["controllerRevision"],
        json!(rev1)
    );

    sc::patch_spec(&sets, &name, json!({"updateStrategy": {"paused": false}}))
        .await
        .expect("resume");
    let upgraded = wait_for("the Pod upgraded in place to v2", UPGRADE, || async {
        let p = pods.get(&pinned.name_any()).await?;
        Ok((sc::spec_image(&p, "logger") == Some(image("sidecar", "v2"))).then_some(p))
    })
    .await
    .expect("upgraded");
    assert_eq!(upgraded.uid(), pinned.uid(), "in place, same Pod");
    let entry = hash_entry(&upgraded, &name);
    assert_eq!(entry["controllerRevision"], json!(rev2), "{entry}");
    assert_eq!(
        entry["hash"].as_str(),
        sets.get(&name)
            .await
            .expect("set")
            .annotations()
            .get(keys::SIDECARSET_HASH_ANNOTATION)
            .map(String::as_str)
    );

    guard.delete().await.expect("delete sidecarset");
    ns.delete().await.expect("delete ns");
}

/// The Pod's `SidecarSetUpgradable` condition as (status, reason, message).
fn upgradable(pod: &Pod) -> Option<(String, String, String)> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "SidecarSetUpgradable")
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

/// Upstream's `SidecarSetUpgradable` Pod condition: True (`AllSidecarsetUpgradable`) once an
/// image change upgraded the Pod in place, False (`UpdateImmutableField`) when the SidecarSet
/// then changes more than images, with the `NotUpgradablePods` Event.
#[tokio::test]
async fn sidecarset_upgradable_condition_follows_what_can_be_upgraded() {
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, "sc-upgradable")
        .await
        .expect("ns");
    let name = format!("{}-upg", ns.name);
    let set = sc::new(
        &name,
        &ns.name,
        "web",
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v1")}]}),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set)
        .await
        .expect("create sidecarset");
    let cs_api = cloneset::api(&client, &ns.name);
    let cs = cloneset::new("web", 1, "v1", json!({})).expect("cloneset");
    cs_api
        .create(&PostParams::default(), &cs)
        .await
        .expect("create cloneset");
    let pods: Api<Pod> = ns.api();
    let pod = ready_pods(&pods, "web", 1).await.remove(0);
    let sets = sc::api(&client);

    sc::patch_spec(
        &sets,
        &name,
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v2")}]}),
    )
    .await
    .expect("image only");
    let cond = wait_for("SidecarSetUpgradable True", UPGRADE, || async {
        let p = pods.get(&pod.name_any()).await?;
        Ok(upgradable(&p).filter(|c| c.0 == "True"))
    })
    .await
    .expect("upgradable");
    assert_eq!(cond.1, "AllSidecarsetUpgradable");
    assert_eq!(cond.2, format!("{{\"{name}\":true}}"));

    sc::patch_spec(
        &sets,
        &name,
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v1"),
            "env": [{"name": "LEVEL", "value": "debug"}]}]}),
    )
    .await
    .expect("env and image");
    let cond = wait_for("SidecarSetUpgradable False", UPGRADE, || async {
        let p = pods.get(&pod.name_any()).await?;
        Ok(upgradable(&p).filter(|c| c.0 == "False"))
    })
    .await
    .expect("not upgradable");
    assert_eq!(cond.1, "UpdateImmutableField");
    assert_eq!(cond.2, format!("{{\"{name}\":false}}"));
    let now = pods.get(&pod.name_any()).await.expect("pod");
    assert_eq!(now.uid(), pod.uid());
    assert_eq!(sc::spec_image(&now, "logger"), Some(image("sidecar", "v2")));
    wait_for("a NotUpgradablePods Event", STARTUP, || async {
        let notes = sc::event_notes(&client, &name, "NotUpgradablePods").await?;
        Ok(notes
            .iter()
            .any(|n| n.contains("detected 1 not upgradable pod(s)"))
            .then_some(()))
    })
    .await
    .expect("NotUpgradablePods Event");

    guard.delete().await.expect("delete sidecarset");
    ns.delete().await.expect("delete ns");
}

/// Puts `data` as the `kruise-configuration` ConfigMap's data (`None` deletes the ConfigMap).
async fn put_kruise_configuration(
    client: &kube::Client,
    ns: &str,
    data: Option<BTreeMap<String, String>>,
) {
    use k8s_openapi::api::core::v1::ConfigMap;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let name = keys::KRUISE_CONFIGURATION_CONFIGMAP;
    match data {
        None => {
            let _ = api.delete(name, &Default::default()).await;
        }
        Some(d) => {
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": ns}, "data": d});
            api.patch(
                name,
                &PatchParams::apply("kruise-e2e").force(),
                &Patch::Apply(&cm),
            )
            .await
            .expect("apply kruise-configuration");
        }
    }
}

/// `patchPodMetadata` as upstream: refused without the whitelist in the manager's
/// `kruise-configuration` ConfigMap or for a key it does not allow; once allowed, written at
/// injection and re-applied (Overwrite) when the sidecar is upgraded in place. Serial: it
/// rewrites that cluster-wide ConfigMap (and restores it).
#[tokio::test]
async fn serial_patch_pod_metadata_is_whitelisted_and_reapplied_on_upgrade() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let client = client().await.expect("client");
    let manager_ns = kruise_e2e::mode::manager_namespace(&client)
        .await
        .expect("manager namespace");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &manager_ns);
    let saved = cms
        .get_opt(keys::KRUISE_CONFIGURATION_CONFIGMAP)
        .await
        .expect("read kruise-configuration")
        .map(|c| c.data.unwrap_or_default());
    let mut without = saved.clone().unwrap_or_default();
    without.remove(keys::SIDECARSET_PATCH_METADATA_WHITELIST_KEY);
    put_kruise_configuration(&client, &manager_ns, Some(without.clone())).await;

    let ns = TestNamespace::create(&client, "sc-patchmeta")
        .await
        .expect("ns");
    let name = format!("{}-meta", ns.name);
    let key = "e2e.kruise.io/sidecar-version";
    let with_patch = |image_tag: &str, version: &str, extra: Option<&str>| {
        let mut ann = json!({ key: version });
        if let Some(k) = extra {
            ann[k] = json!("x");
        }
        sc::new(
            &name,
            &ns.name,
            "web",
            json!({"containers": [{"name": "logger", "image": image("sidecar", image_tag)}],
                "patchPodMetadata": [{"annotations": ann, "patchPolicy": "Overwrite"}]}),
        )
        .expect("set")
    };
    let sets = sc::api(&client);
    let refused = sets
        .create(&PostParams::default(), &with_patch("v1", "v1", None))
        .await
        .expect_err("no whitelist: refused");
    assert!(
        refused.to_string().contains(
            "spec.patchPodMetadata: Required value: SidecarSet patch metadata whitelist not found"
        ),
        "{refused}"
    );
    let mut allowed = without.clone();
    allowed.insert(
        keys::SIDECARSET_PATCH_METADATA_WHITELIST_KEY.to_owned(),
        json!({"rules": [{"allowedAnnotationKeyExprs": ["^e2e\\.kruise\\.io/"]}]}).to_string(),
    );
    put_kruise_configuration(&client, &manager_ns, Some(allowed)).await;
    let refused = sets
        .create(
            &PostParams::default(),
            &with_patch("v1", "v1", Some("other.example.com/key")),
        )
        .await
        .expect_err("a key outside the whitelist: refused");
    assert!(
        refused
            .to_string()
            .contains("sidecarSet patch metadata annotation(other.example.com/key) is not allowed"),
        "{refused}"
    );
    let (guard, _) = Guard::create(&client, &with_patch("v1", "v1", None))
        .await
        .expect("whitelisted key: created");

    let cs_api = cloneset::api(&client, &ns.name);
    let cs = cloneset::new("web", 1, "v1", json!({})).expect("cloneset");
    cs_api
        .create(&PostParams::default(), &cs)
        .await
        .expect("create cloneset");
    let pods: Api<Pod> = ns.api();
    let pod = ready_pods(&pods, "web", 1).await.remove(0);
    assert_eq!(pod.annotations().get(key).map(String::as_str), Some("v1"));

    sc::patch_spec(
        &sets,
        &name,
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v2")}],
            "patchPodMetadata": [{"annotations": { key: "v2" }, "patchPolicy": "Overwrite"}]}),
    )
    .await
    .expect("new image and annotation");
    let upgraded = wait_for(
        "the Pod upgraded with the new annotation",
        UPGRADE,
        || async {
            let p = pods.get(&pod.name_any()).await?;
            Ok((sc::spec_image(&p, "logger") == Some(image("sidecar", "v2"))).then_some(p))
        },
    )
    .await
    .expect("upgraded");
    assert_eq!(upgraded.uid(), pod.uid(), "in place");
    assert_eq!(
        upgraded.annotations().get(key).map(String::as_str),
        Some("v2"),
        "patchPodMetadata re-applied with the upgrade"
    );

    guard.delete().await.expect("delete sidecarset");
    ns.delete().await.expect("delete ns");
    put_kruise_configuration(&client, &manager_ns, saved).await;
}

/// Upstream's "SidecarSet, inject sidecar, update sidecar image" under a PodUnavailableBudget:
/// a SidecarSet allowed to upgrade every Pod at once (maxUnavailable 100%) over a CloneSet of
/// 5, and a budget allowing 1. The upgrade leaves the Pods Ready for the budget's webhook to
/// charge, so it goes one Pod at a time: never more than one Pod upgrading or unready, all end
/// upgraded in place.
#[tokio::test]
async fn upgrade_waits_for_a_pod_unavailable_budget() {
    use kruise_api::policy::v1alpha1::PodUnavailableBudget;
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, "sc-pub").await.expect("ns");
    let budgets: Api<PodUnavailableBudget> = ns.api();
    let budget: PodUnavailableBudget = serde_json::from_value(json!({
        "apiVersion": keys::POLICY_V1ALPHA1, "kind": keys::PUB_KIND,
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}
    }))
    .expect("budget");
    budgets
        .create(&PostParams::default(), &budget)
        .await
        .expect("create budget");
    let name = format!("{}-pub", ns.name);
    let set = sc::new(
        &name,
        &ns.name,
        "web",
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v1")}],
            "updateStrategy": {"maxUnavailable": "100%"}}),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set)
        .await
        .expect("create sidecarset");
    let cs_api = cloneset::api(&client, &ns.name);
    let cs = cloneset::new("web", 5, "v1", json!({})).expect("cloneset");
    cs_api
        .create(&PostParams::default(), &cs)
        .await
        .expect("create cloneset");
    let pods: Api<Pod> = ns.api();
    let before = ready_pods(&pods, "web", 5).await;
    wait_for("the budget allows 1 of 5", STARTUP, || async {
        let b = budgets.get("web").await?;
        Ok(b.status
            .filter(|s| {
                (
                    s.unavailable_allowed,
                    s.current_available,
                    s.desired_available,
                ) == (1, 5, 4)
            })
            .map(|_| ()))
    })
    .await
    .expect("budget status");

    let sets = sc::api(&client);
    sc::patch_spec(
        &sets,
        &name,
        json!({"containers": [{"name": "logger", "image": image("sidecar", "v2")}]}),
    )
    .await
    .expect("set image");
    let v2 = image("sidecar", "v2");
    // Upgrading: the spec asks for v2 and the container does not run it Ready yet.
    let busy = |p: &Pod| {
        let asked = sc::spec_image(p, "logger").as_deref() == Some(v2.as_str());
        let runs = container_status(p, "logger")
            .is_some_and(|s| s.image.contains("sidecar:v2") && s.ready);
        !pod_ready(p) || (asked && !runs)
    };
    let mut most = 0;
    let deadline = tokio::time::Instant::now() + UPGRADE;
    loop {
        let now = pods_of(&pods, "web").await;
        let at_once = now.iter().filter(|p| busy(p)).count();
        most = most.max(at_once);
        let done = now.len() == 5
            && now
                .iter()
                .all(|p| sc::spec_image(p, "logger").as_deref() == Some(v2.as_str()) && !busy(p));
        if done {
            break;
        }
        assert!(
            most <= 1,
            "{at_once} Pods upgrading or unready at once under a budget allowing 1"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "upgrade stuck: {} of 5 done",
            now.iter().filter(|p| !busy(p)).count()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(most <= 1, "saw {most} Pods upgrading at once");
    let after = pods_of(&pods, "web").await;
    let uids = |l: &[Pod]| -> Vec<String> { l.iter().filter_map(|p| p.uid()).collect() };
    assert_eq!(uids(&before), uids(&after), "upgraded in place: same Pods");
    for p in &after {
        let logger = container_status(p, "logger").expect("logger status");
        assert_eq!(logger.restart_count, 1, "sidecar of {}", p.name_any());
    }
    wait_for("status updatedReadyPods 5", STARTUP, || async {
        let s = sets.get(&name).await?;
        Ok(s.status
            .filter(|st| st.updated_pods == 5 && st.updated_ready_pods == 5)
            .map(|_| ()))
    })
    .await
    .expect("final status");
    guard.delete().await.expect("delete sidecarset");
    ns.delete().await.expect("delete ns");
}

/// Upstream's hot-upgrade SidecarSet (`test/e2e/framework/*/sidecarset_utils.go` and "sidecarSet
/// upgrade hot sidecar container image"): an init container, one hot sidecar sharing the Pod's
/// volumes, scoped to the namespace the way each API version says it, written through `version`.
/// Its `tail -f /dev/null` ignores SIGTERM (PID 1), so each stop of a sidecar container takes the
/// Pod's grace period: the time the kubelet needs to put the emptied container on the empty image.
fn upstream_hot_set(version: &str, name: &str, ns: &str, tag: &str) -> serde_json::Value {
    let scope = if version == keys::VERSION_V1ALPHA1 {
        json!({"namespace": ns})
    } else {
        json!({"namespaceSelector": {"matchLabels": {keys::k8s::NAMESPACE_NAME_LABEL: ns}}})
    };
    let mut spec = json!({
        "selector": {"matchLabels": {"app": "sidecarset"}},
        "updateStrategy": {"type": "RollingUpdate"},
        "initContainers": [{"name": "init-sidecar", "image": image("sidecar", "v1"),
            "command": ["/bin/sh", "-c", "sleep 1"]}],
        "containers": [{"name": "nginx-sidecar", "image": image("sidecar", tag),
            "imagePullPolicy": "IfNotPresent", "command": ["tail", "-f", "/dev/null"],
            "podInjectPolicy": "BeforeAppContainer",
            "shareVolumePolicy": {"type": "enabled"},
            "upgradeStrategy": {"upgradeType": "HotUpgrade",
                "hotUpgradeEmptyImage": image("sidecar", "empty")}}]
    });
    json_patch::merge(&mut spec, &scope);
    json!({"apiVersion": format!("{}/{version}", keys::APPS_GROUP), "kind": "SidecarSet",
        "metadata": {"name": name}, "spec": spec})
}

/// The SidecarSet's status counts (matched, updated, updatedReady, ready) once it has observed
/// its generation, read through the API version the test writes.
fn observed_counts(s: &kube::api::DynamicObject) -> Option<[i64; 4]> {
    let st = &s.data["status"];
    (s.metadata.generation == st["observedGeneration"].as_i64()).then(|| {
        [
            "matchedPods",
            "updatedPods",
            "updatedReadyPods",
            "readyPods",
        ]
        .map(|f| st[f].as_i64().unwrap_or_default())
    })
}

/// Upstream's tester writes a new spec by read-modify-replace, not by patch.
async fn replace_spec(
    api: &Api<kube::api::DynamicObject>,
    name: &str,
    edit: impl Fn(&mut serde_json::Value),
) {
    for _ in 0..5 {
        let mut s = api.get(name).await.expect("get sidecarset");
        edit(&mut s.data["spec"]);
        match api.replace(name, &PostParams::default(), &s).await {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => panic!("replace sidecarset: {e}"),
        }
    }
    panic!("replace sidecarset: conflicts");
}

/// The working container of the hot sidecar and the idle one, with the images their spec gives.
fn hot_pair(p: &Pod) -> ((String, Option<String>), (String, Option<String>)) {
    let w = p
        .annotations()
        .get(keys::SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION)
        .and_then(|v| serde_json::from_str::<BTreeMap<String, String>>(v).ok())
        .and_then(|m| m.get("nginx-sidecar").cloned())
        .unwrap_or_default();
    let idle = if w == "nginx-sidecar-1" {
        "nginx-sidecar-2"
    } else {
        "nginx-sidecar-1"
    };
    (
        (w.clone(), sc::spec_image(p, &w)),
        (idle.to_owned(), sc::spec_image(p, idle)),
    )
}

/// Upstream's scenario: the image goes v1 → v2 → v1 (back to the first image: the pair flips
/// back) with the status matched 1 / updated 1 / updatedReady 1 / ready 1 after each, counted
/// only once the idle container runs the empty image, then an env-only change upgrades nothing
/// (updated 0, ready 1).
async fn hot_upgrade_there_and_back(version: &str, prefix: &str) {
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, prefix).await.expect("ns");
    let name = format!("{}-hot", ns.name);
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(keys::APPS_GROUP, version, "SidecarSet"),
        "sidecarsets",
    );
    let api: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &ar);
    let set: kube::api::DynamicObject =
        serde_json::from_value(upstream_hot_set(version, &name, &ns.name, "v1")).expect("set");
    api.create(&PostParams::default(), &set)
        .await
        .expect("create sidecarset");
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "deployment-test"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "sidecarset"}},
            "template": {"metadata": {"labels": {"app": "sidecarset"}},
                "spec": {"terminationGracePeriodSeconds": 3,
                    "containers": [{"name": "main", "image": image("sidecar", "v1")}]}}}
    }))
    .expect("deployment");
    ns.api::<Deployment>()
        .create(&PostParams::default(), &deploy)
        .await
        .expect("create deployment");
    let pods: Api<Pod> = ns.api();
    let pod = ready_pods(&pods, "sidecarset", 1).await.remove(0);
    let want = |tag: &str| Some(image("sidecar", tag));
    assert_eq!(
        hot_pair(&pod),
        (
            ("nginx-sidecar-1".to_owned(), want("v1")),
            ("nginx-sidecar-2".to_owned(), want("empty"))
        )
    );
    let version_of = |p: &Pod, k: &str| p.annotations().get(k).cloned().unwrap_or_default();
    assert_eq!(
        [
            "version.sidecarset.kruise.io/nginx-sidecar-1",
            "versionalt.sidecarset.kruise.io/nginx-sidecar-1",
            "version.sidecarset.kruise.io/nginx-sidecar-2",
            "versionalt.sidecarset.kruise.io/nginx-sidecar-2"
        ]
        .map(|k| version_of(&pod, k)),
        ["1", "0", "0", "1"]
    );

    for (tag, working) in [("v2", "nginx-sidecar-2"), ("v1", "nginx-sidecar-1")] {
        let img = image("sidecar", tag);
        replace_spec(&api, &name, |s| s["containers"][0]["image"] = json!(img)).await;
        let last = std::cell::RefCell::new(None);
        let done = wait_for(
            &format!("{tag}: matched 1, updated 1, updatedReady 1, ready 1"),
            STARTUP,
            || async {
                let counts = observed_counts(&api.get(&name).await?);
                *last.borrow_mut() = counts;
                Ok((counts == Some([1, 1, 1, 1])).then_some(()))
            },
        )
        .await;
        let p = pods_of(&pods, "sidecarset").await.remove(0);
        assert!(
            done.is_ok(),
            "{tag}: status (matched, updated, updatedReady, ready) {:?}; Pod annotations {:?}, \
             containers {:?}",
            last.borrow(),
            p.annotations(),
            p.status.as_ref().map(|s| &s.container_statuses)
        );
        assert_eq!(p.uid(), pod.uid(), "same Pod");
        let idle = if working == "nginx-sidecar-1" {
            "nginx-sidecar-2"
        } else {
            "nginx-sidecar-1"
        };
        assert_eq!(
            hot_pair(&p),
            (
                (working.to_owned(), want(tag)),
                (idle.to_owned(), want("empty"))
            ),
            "{tag}"
        );
        // Read after the status: the Pod it counted as updated and ready already runs the new
        // version in the working container and the empty image in the idle one (upstream
        // records the emptied container's image ID and waits for the kubelet to move off it).
        let running = |c: &str| {
            container_status(&p, c)
                .filter(|s| s.state.as_ref().is_some_and(|st| st.running.is_some()))
                .map(|s| s.image.clone())
        };
        assert_eq!(
            (running(working), running(idle)),
            (want(tag), want("empty")),
            "{tag}: what runs when the status says updatedReady 1: {:?}",
            p.status.as_ref().map(|s| &s.container_statuses)
        );
    }

    // Anything but the image: nothing is upgraded, the Pod stays as it is.
    let before = pods_of(&pods, "sidecarset").await.remove(0);
    replace_spec(&api, &name, |s| {
        s["containers"][0]["env"] = json!([{"name": "PROXY", "value": "127.0.0.1"}]);
    })
    .await;
    wait_for("env: matched 1, updated 0, ready 1", STARTUP, || async {
        let counts = observed_counts(&api.get(&name).await?);
        Ok((counts == Some([1, 0, 0, 1])).then_some(()))
    })
    .await
    .expect("env change upgrades nothing");
    let after = pods_of(&pods, "sidecarset").await.remove(0);
    assert_eq!(
        after.spec.as_ref().map(|s| &s.containers),
        before.spec.as_ref().map(|s| &s.containers)
    );
    api.delete(&name, &Default::default())
        .await
        .expect("delete sidecarset");
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn hot_upgrade_through_v1beta1_flips_back_to_the_first_image() {
    hot_upgrade_there_and_back(keys::VERSION_V1BETA1, "sc-hot-beta").await;
}

#[tokio::test]
async fn hot_upgrade_through_v1alpha1_flips_back_to_the_first_image() {
    hot_upgrade_there_and_back(keys::VERSION_V1ALPHA1, "sc-hot-alpha").await;
}
