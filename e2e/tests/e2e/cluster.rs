//! The cluster under test itself: a Ready node, Pods from the local registry, the upstream
//! in-place image guarantee the whole project rests on, garbage collection, cluster DNS names
//! (Services, headless Pods) and dynamically provisioned volumes of the default StorageClass.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{
    Event, Node, PersistentVolume, PersistentVolumeClaim, Pod, Service,
};
use kruise_e2e::{TestNamespace, client, container_status, image, pod_ready, wait_for, wait_pod};
use kube::api::{DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

fn test_pod(name: &str, tag: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "app",
                "image": image("testapp", tag),
                "ports": [{"containerPort": 8080}],
                "readinessProbe": {
                    "httpGet": {"path": "/", "port": 8080},
                    "periodSeconds": 1
                }
            }]
        }
    }))
    .expect("valid pod")
}

#[tokio::test]
async fn node_is_ready() {
    let client = client().await.expect("cluster");
    let nodes: Api<Node> = Api::all(client);
    let ready = wait_for("a Ready node", Duration::from_secs(60), || async {
        let list = nodes.list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .find(kruise_e2e::node_ready)
            .map(|n| n.name_any()))
    })
    .await
    .expect("node Ready");
    assert!(!ready.is_empty());
}

#[tokio::test]
async fn pod_runs_from_local_registry() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-pod").await.expect("ns");
    let pods: Api<Pod> = ns.api();
    pods.create(&PostParams::default(), &test_pod("web", "v1"))
        .await
        .expect("create pod");
    let pod = wait_pod(&pods, "web", "Ready", Duration::from_secs(90), pod_ready)
        .await
        .expect("pod Ready");
    let status = container_status(&pod, "app").expect("container status");
    assert_eq!(status.image, image("testapp", "v1"));
    assert!(
        status.image_id.contains("sha256:"),
        "imageID is a digest: {}",
        status.image_id
    );
    ns.delete().await.expect("delete ns");
}

/// Patching only a container's image restarts that container in the same Pod: same UID, a new
/// containerID, restartCount 1 and a different imageID.
#[tokio::test]
async fn image_patch_restarts_container_in_place() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-inplace")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    pods.create(&PostParams::default(), &test_pod("web", "v1"))
        .await
        .expect("create pod");
    let before = wait_pod(&pods, "web", "Ready", Duration::from_secs(90), pod_ready)
        .await
        .expect("pod Ready");
    let old = container_status(&before, "app").expect("status").clone();
    assert_eq!(old.restart_count, 0);
    let old_id = old.container_id.clone().expect("containerID");

    let patch = json!({"spec": {"containers": [{"name": "app", "image": image("testapp", "v2")}]}});
    pods.patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("patch image");

    let after = wait_pod(
        &pods,
        "web",
        "container restarted on the new image and Ready",
        Duration::from_secs(90),
        |p| {
            container_status(p, "app").is_some_and(|c| {
                c.container_id.as_deref().is_some_and(|id| id != old_id) && c.ready
            }) && pod_ready(p)
        },
    )
    .await
    .expect("in-place restart");
    let new = container_status(&after, "app").expect("status");
    assert_eq!(after.uid(), before.uid(), "the Pod was not recreated");
    assert_eq!(new.restart_count, 1);
    assert_eq!(new.image, image("testapp", "v2"));
    assert_ne!(
        new.image_id, old.image_id,
        "the new container runs another image"
    );
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn deleting_a_deployment_collects_its_replicaset_and_pods() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-gc").await.expect("ns");
    let deploys: Api<Deployment> = ns.api();
    let rs: Api<ReplicaSet> = ns.api();
    let pods: Api<Pod> = ns.api();
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{"name": "app", "image": image("testapp", "v1")}]
                }
            }
        }
    }))
    .expect("valid deployment");
    deploys
        .create(&PostParams::default(), &deploy)
        .await
        .expect("create deployment");
    let lp = ListParams::default().labels("app=web");
    wait_for(
        "2 pods of the deployment",
        Duration::from_secs(60),
        || async {
            let n = pods.list(&lp).await?.items.len();
            Ok((n == 2).then_some(()))
        },
    )
    .await
    .expect("pods created");
    assert_eq!(rs.list(&lp).await.expect("list rs").items.len(), 1);

    deploys
        .delete("web", &DeleteParams::background())
        .await
        .expect("delete deployment");
    wait_for(
        "the ReplicaSet and Pods to be garbage-collected",
        Duration::from_secs(90),
        || async {
            let left = rs.list(&lp).await?.items.len() + pods.list(&lp).await?.items.len();
            Ok((left == 0).then_some(()))
        },
    )
    .await
    .expect("garbage collection");
    ns.delete().await.expect("delete ns");
}

// ---------------------------------------------------------------------------------------------
// Cluster DNS (CoreDNS behind the kube-dns Service) and the default StorageClass (local-path).

/// The kube-dns Service's address on the local cluster (hack/lib.sh `KRS_DNS_IP`).
const CLUSTER_DNS: &str = "10.96.0.10";

/// A Pod of our busybox image that runs `script` once (`restartPolicy: Never`).
fn shell_pod(name: &str, script: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "sh",
                "image": image("sidecar", "v1"),
                "command": ["/bin/sh", "-c", script]
            }]
        }
    }))
    .expect("valid pod")
}

/// Waits for a run-once Pod to finish and returns its phase and its log.
async fn finished(pods: &Api<Pod>, name: &str) -> (String, String) {
    let pod = wait_pod(
        pods,
        name,
        "Succeeded or Failed",
        Duration::from_secs(120),
        |p| {
            matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        },
    )
    .await
    .expect("pod finished");
    let phase = pod
        .status
        .and_then(|s| s.phase)
        .expect("phase of a finished pod");
    let log = pods
        .logs(name, &LogParams::default())
        .await
        .expect("pod log");
    (phase, log)
}

/// The addresses busybox's nslookup printed for `name` in a `== NAME` section of `log`
/// (the resolver's own address, printed first as `Server:`/`Address: IP:53`, is skipped).
fn resolved(log: &str, name: &str) -> Vec<String> {
    let header = format!("== {name}");
    log.lines()
        .skip_while(|l| l.trim() != header)
        .skip(1)
        .take_while(|l| !l.starts_with("== "))
        .filter_map(|l| l.trim().strip_prefix("Address:"))
        .map(|a| a.trim().to_string())
        .filter(|a| !a.ends_with(":53"))
        .collect()
}

/// How a lookup script asks for a name.
#[derive(Clone, Copy)]
enum Lookup {
    /// busybox's `nslookup`, which asks the cluster DNS directly (it applies the search path only
    /// to names without a dot, so a name with dots must be fully qualified).
    Nslookup,
    /// The C library's resolver, as applications resolve names: the Pod's search path and
    /// `ndots:5`, so `NAME-0.SVC` works. busybox's `ping` prints `PING NAME (IP)` once it resolved
    /// the name (whether the address answers pings does not matter).
    Libc,
}

/// A script that looks each name up (retrying while the records propagate) and prints the
/// answers as `Address: IP` lines under `== NAME`; it exits 1 naming the first name that never
/// resolves.
fn lookups(names: &[(Lookup, String)]) -> String {
    let mut script = String::new();
    for (how, n) in names {
        // Each answer is kept in the shell variable `out`.
        let (ask, ok, show) = match how {
            Lookup::Nslookup => (
                format!("out=$(nslookup {n} 2>&1)"),
                "echo \"$out\" | grep -q '^Name:'".to_string(),
                "echo \"$out\"".to_string(),
            ),
            Lookup::Libc => (
                format!("out=$(ping -c1 -W1 {n} 2>&1)"),
                format!("echo \"$out\" | grep -q '^PING {n} ('"),
                "echo \"$out\" | sed -n 's/^PING [^ ]* (\\([0-9.]*\\)).*/Address: \\1/p'"
                    .to_string(),
            ),
        };
        script.push_str(&format!(
            "i=0; until {ask}; {ok}; do i=$((i+1)); \
             if [ $i -ge 30 ]; then echo \"unresolved {n}\"; echo \"$out\"; exit 1; fi; sleep 1; done; \
             echo '== {n}'; {show}\n"
        ));
    }
    script
}

/// From another Pod, a Pod behind a headless Service resolves by its full name
/// `NAME-0.SVC.NS.svc.cluster.local` (nslookup) and as `NAME-0.SVC` / `NAME-0.SVC.NS` (the search
/// path), and a ClusterIP Service by its short and full names.
#[tokio::test]
async fn service_and_headless_pod_names_resolve_from_a_pod() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-dns").await.expect("ns");
    let pods: Api<Pod> = ns.api();
    let services: Api<Service> = ns.api();
    for svc in [
        json!({"metadata": {"name": "web"},
               "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"port": 8080}]}}),
        json!({"metadata": {"name": "front"},
               "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
    ] {
        let svc: Service = serde_json::from_value(svc).expect("valid service");
        services
            .create(&PostParams::default(), &svc)
            .await
            .expect("create service");
    }
    // A StatefulSet Pod's identity: hostname and the headless Service as its subdomain.
    let mut web = test_pod("web-0", "v1");
    web.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
    if let Some(spec) = web.spec.as_mut() {
        spec.hostname = Some("web-0".into());
        spec.subdomain = Some("web".into());
    }
    pods.create(&PostParams::default(), &web)
        .await
        .expect("create web-0");
    let web = wait_pod(&pods, "web-0", "Ready", Duration::from_secs(90), pod_ready)
        .await
        .expect("web-0 Ready");
    let pod_ip = web
        .status
        .and_then(|s| s.pod_ip)
        .expect("web-0 has an address");
    let front_ip = services
        .get("front")
        .await
        .expect("get front")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("front has a ClusterIP");

    let full = format!("web-0.web.{}.svc.cluster.local", ns.name);
    let front_full = format!("front.{}.svc.cluster.local", ns.name);
    let names = [
        (Lookup::Nslookup, full.clone()),
        (Lookup::Nslookup, front_full.clone()),
        (Lookup::Nslookup, "front".to_string()),
        (Lookup::Libc, "web-0.web".to_string()),
        (Lookup::Libc, format!("web-0.web.{}", ns.name)),
    ];
    pods.create(
        &PostParams::default(),
        &shell_pod("client", &lookups(&names)),
    )
    .await
    .expect("create client");
    let (phase, log) = finished(&pods, "client").await;
    assert_eq!(phase, "Succeeded", "every name resolves; log:\n{log}");
    for (_, name) in &names {
        let want = if name.starts_with("front") {
            &front_ip
        } else {
            &pod_ip
        };
        assert_eq!(
            resolved(&log, name),
            std::slice::from_ref(want),
            "{name} resolves to {want}; log:\n{log}"
        );
    }
    ns.delete().await.expect("delete ns");
}

/// A new Pod's resolver is the cluster DNS with the cluster's search path, and the kubelet no
/// longer warns `MissingClusterDNS` about it.
#[tokio::test]
async fn new_pod_uses_cluster_dns_without_missing_cluster_dns_event() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-dnsconf")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    pods.create(
        &PostParams::default(),
        &shell_pod("conf", "cat /etc/resolv.conf"),
    )
    .await
    .expect("create pod");
    let (phase, log) = finished(&pods, "conf").await;
    assert_eq!(phase, "Succeeded", "log:\n{log}");
    assert!(
        log.lines()
            .any(|l| l.trim() == format!("nameserver {CLUSTER_DNS}")),
        "resolv.conf names the cluster DNS:\n{log}"
    );
    let search = format!(
        "search {}.svc.cluster.local svc.cluster.local cluster.local",
        ns.name
    );
    assert!(
        log.lines().any(|l| l.starts_with(&search)),
        "resolv.conf searches the cluster's domains ({search}):\n{log}"
    );
    // The kubelet records the warning when it sets the Pod's sandbox up, long before it finished.
    let events: Api<Event> = ns.api();
    let warnings: Vec<String> = events
        .list(&ListParams::default().fields("involvedObject.name=conf"))
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("MissingClusterDNS"))
        .filter_map(|e| e.message)
        .collect();
    assert!(
        warnings.is_empty(),
        "MissingClusterDNS events: {warnings:?}"
    );
    ns.delete().await.expect("delete ns");
}

/// A claim that names no StorageClass gets the default one, binds to a volume the local-path
/// provisioner made, and keeps its data across Pods: one writes a file, is deleted, and a new Pod
/// of the same claim reads it back.
#[tokio::test]
async fn claim_without_storage_class_binds_and_keeps_data_across_pods() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-pvc").await.expect("ns");
    let pods: Api<Pod> = ns.api();
    let claims: Api<PersistentVolumeClaim> = ns.api();
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "16Mi"}}
        }
    }))
    .expect("valid claim");
    claims
        .create(&PostParams::default(), &claim)
        .await
        .expect("create claim");
    let with_claim = |name: &str, script: &str| {
        let mut pod = shell_pod(name, script);
        let spec = pod.spec.as_mut().expect("spec");
        spec.volumes = Some(vec![
            serde_json::from_value(
                json!({"name": "data", "persistentVolumeClaim": {"claimName": "data"}}),
            )
            .expect("valid volume"),
        ]);
        spec.containers[0].volume_mounts = Some(vec![
            serde_json::from_value(json!({"name": "data", "mountPath": "/data"}))
                .expect("valid mount"),
        ]);
        pod
    };
    // Unique per run, so a file left from elsewhere cannot pass for this one.
    let token = format!("written-in-{}", ns.name);
    let writer = pods
        .create(
            &PostParams::default(),
            &with_claim("writer", &format!("echo {token} > /data/hello && sync")),
        )
        .await
        .expect("create writer");
    let (phase, log) = finished(&pods, "writer").await;
    assert_eq!(phase, "Succeeded", "the writer wrote; log:\n{log}");

    let bound = claims.get("data").await.expect("get claim");
    let spec = bound.spec.clone().expect("claim spec");
    assert_eq!(
        spec.storage_class_name.as_deref(),
        Some("local-path"),
        "the default StorageClass was filled in"
    );
    assert_eq!(
        bound.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Bound")
    );
    let pv_name = spec.volume_name.expect("bound to a volume");
    let pv = Api::<PersistentVolume>::all(client.clone())
        .get(&pv_name)
        .await
        .expect("get volume");
    assert_eq!(
        pv.annotations()
            .get("pv.kubernetes.io/provisioned-by")
            .map(String::as_str),
        Some("rancher.io/local-path"),
        "the volume was provisioned dynamically"
    );

    pods.delete("writer", &DeleteParams::default())
        .await
        .expect("delete writer");
    wait_for("the writer to be gone", Duration::from_secs(60), || async {
        Ok(pods.get_opt("writer").await?.is_none().then_some(()))
    })
    .await
    .expect("writer deleted");
    let reader = pods
        .create(
            &PostParams::default(),
            &with_claim("reader", "cat /data/hello"),
        )
        .await
        .expect("create reader");
    assert_ne!(reader.uid(), writer.uid());
    let (phase, log) = finished(&pods, "reader").await;
    assert_eq!(phase, "Succeeded", "log:\n{log}");
    assert_eq!(
        log.trim(),
        token,
        "the new Pod reads what the old one wrote"
    );
    assert_eq!(
        claims
            .get("data")
            .await
            .expect("get claim")
            .spec
            .and_then(|s| s.volume_name),
        Some(pv_name),
        "the claim kept its volume"
    );
    ns.delete().await.expect("delete ns");
}
