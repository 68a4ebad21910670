//! `kubectl kruise migrate CloneSet --from Deployment`: a Deployment's replicas move to a new
//! CloneSet while a client inside the cluster keeps calling the Service in front of both, and no
//! call fails; the dry run prints the CloneSet and changes nothing; the refusals name the flag
//! and exit with the documented codes. `migrate AdvancedStatefulSet --from StatefulSet`: the
//! same Pods (UIDs, volumes, restart counts) change controller, and later update in place.
//!
//! Needs the binary: `cargo build -p kubectl-kruise`.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, Service};
use kruise_e2e::plugin::{
    CLI_LIMIT, Fixture, assert_code, assert_stdout, kruise_resource, template,
};
use kruise_e2e::{image, pod_ready, wait_for, wait_pod};
use kube::api::{DynamicObject, ListParams, LogParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const OK: i32 = 0;
const USAGE: i32 = 2;
const TIMEOUT: i32 = 4;
const NOT_FOUND: i32 = 6;

/// Seconds the client calls the Service for; the move (4 replicas, 2 at a time) ends well
/// before.
const CLIENT_SECONDS: u64 = 50;

/// testapp `v1` behind label `app`, leaving the Service's endpoints before it stops (a preStop
/// pause longer than kube-proxy's resync), as a Deployment that is scaled down without dropping
/// calls must.
fn graceful_template(app: &str) -> Value {
    let mut t = template(app, "v1");
    t["spec"]["terminationGracePeriodSeconds"] = json!(10);
    t["spec"]["containers"][0]["readinessProbe"]["initialDelaySeconds"] = json!(2);
    t["spec"]["containers"][0]["lifecycle"] =
        json!({"preStop": {"exec": {"command": ["sleep", "3"]}}});
    t
}

async fn create_deployment(fx: &Fixture, name: &str, replicas: i32, template: Value) {
    let api: Api<Deployment> = fx.ns.api();
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"team": "e2e"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": template}
    }))
    .expect("Deployment");
    api.create(&PostParams::default(), &d)
        .await
        .expect("create Deployment");
}

/// A busybox Pod calling `http://IP/` every 0.2 s (with `nc`: the image's static busybox `wget`
/// crashes with a segmentation fault on every call) for [`CLIENT_SECONDS`]; its last line is
/// `ok=N fail=M`, each failure logged as it happens.
fn client_pod(ip: &str) -> Pod {
    let script = format!(
        "ok=0; fail=0; end=$(( $(date +%s) + {CLIENT_SECONDS} )); echo started; \
         while [ $(date +%s) -lt $end ]; do \
           if printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 {ip} 80 2>/dev/null | head -n1 | grep -q ' 200 '; \
           then ok=$((ok+1)); \
           else fail=$((fail+1)); echo \"failed at $(date +%T)\"; fi; \
           sleep 0.2; \
         done; echo \"ok=$ok fail=$fail\""
    );
    serde_json::from_value(json!({
        "metadata": {"name": "client"},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "sh", "image": image("sidecar", "v1"),
                            "command": ["/bin/sh", "-c", script]}]
        }
    }))
    .expect("client Pod")
}

/// `migrate CloneSet --from Deployment --src-name EXTRA...`, expected to return promptly.
async fn migrate(fx: &Fixture, extra: &[&str]) -> kruise_e2e::cli::Run {
    let mut args = vec!["migrate", "CloneSet", "--from", "Deployment", "--src-name"];
    args.extend_from_slice(extra);
    fx.run(&args).await
}

fn controller_kind(p: &Pod) -> String {
    p.owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.kind.clone())
        .unwrap_or_default()
}

/// 4 replicas of a Deployment behind a Service move to a CloneSet, 2 at a time, while a client
/// calls the Service's cluster IP — interrupted once by `--timeout` and resumed by the same
/// command: no call fails, the CloneSet ends with 4 Ready Pods it
/// controls, the Deployment is kept with 0 replicas and no Pods.
#[tokio::test]
async fn migrate_deployment_to_cloneset_without_a_failed_call() {
    let fx = Fixture::new("e2e-cli-migrate").await;
    create_deployment(&fx, "web", 4, graceful_template("web")).await;
    let services: Api<Service> = fx.ns.api();
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}
    }))
    .expect("Service");
    let ip = services
        .create(&PostParams::default(), &svc)
        .await
        .expect("create Service")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a cluster IP");
    assert_code(&fx.status("deploy/web").await, OK);

    fx.pods
        .create(&PostParams::default(), &client_pod(&ip))
        .await
        .expect("create client");
    wait_for(
        "the client's first call",
        Duration::from_secs(60),
        || async {
            let log = fx.pods.logs("client", &LogParams::default()).await;
            Ok(log.ok().filter(|l| l.contains("started")).map(|_| ()))
        },
    )
    .await
    .expect("client started");
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Interrupted: a 1 s limit ends the first run while the CloneSet's first Pods start (their
    // readiness probe waits 2 s), with exit 4; the same command, rerun, continues from the live
    // replicas.
    let args = |limit: &'static str| {
        [
            "migrate",
            "CloneSet",
            "--from",
            "Deployment",
            "--src-name",
            "web",
            "--create",
            "--copy",
            "--max-surge",
            "2",
            "--timeout",
            limit,
        ]
    };
    let first = fx
        .kk
        .run_for(&args("1s"), CLI_LIMIT)
        .await
        .expect("run migrate");
    assert_code(&first, TIMEOUT);
    assert_stdout(
        &first,
        "cloneset/web created from deployment/web with 0 replicas",
    );
    assert_stdout(&first, "cloneset/web: replicas 0 -> 2");
    assert!(first.stderr.contains("rerun the same command"), "{first}");
    let run = fx
        .kk
        .run_for(&args("3m"), CLI_LIMIT)
        .await
        .expect("run migrate");
    assert_code(&run, OK);
    assert_stdout(
        &run,
        "resuming the move recorded on cloneset/web (4 of deployment/web's 4 replicas)",
    );
    assert!(
        !run.stdout.contains("created"),
        "resumed, not created again: {run}"
    );
    assert!(
        !run.stdout.contains("replicas 0 -> 2"),
        "resumed at 2: {run}"
    );
    assert_code(&run, OK);
    assert_stdout(&run, "deployment/web: replicas 4 -> 2");
    assert_stdout(&run, "cloneset/web: replicas 2 -> 4");
    assert_stdout(
        &run,
        "migrated 4 replicas from deployment/web to cloneset/web",
    );
    assert_stdout(&run, "not moved: HorizontalPodAutoscalers");
    let client = fx.pods.get("client").await.expect("client");
    assert_eq!(
        client.status.and_then(|s| s.phase).as_deref(),
        Some("Running"),
        "the client still calls when the move ends (else the move outlasted it): {run}"
    );

    // The Deployment is kept, scaled to 0; its Pods leave.
    let deployments: Api<Deployment> = fx.ns.api();
    let d = deployments.get("web").await.expect("Deployment kept");
    assert_eq!(d.spec.and_then(|s| s.replicas), Some(0));
    let owned = wait_for(
        "4 Ready CloneSet Pods and none of the Deployment",
        Duration::from_secs(60),
        || async {
            let pods = fx
                .pods
                .list(&ListParams::default().labels("app=web"))
                .await?;
            let live: Vec<&Pod> = pods
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            let by_cloneset = live
                .iter()
                .filter(|p| controller_kind(p) == "CloneSet" && pod_ready(p))
                .count();
            Ok((by_cloneset == 4 && live.len() == 4).then_some(by_cloneset))
        },
    )
    .await
    .expect("the CloneSet owns every Pod");
    assert_eq!(owned, 4);
    let cs_api: Api<DynamicObject> = Api::namespaced_with(
        fx.client.clone(),
        &fx.ns.name,
        &kruise_resource(&fx.client, "clonesets").await,
    );
    let cs = cs_api.get("web").await.expect("CloneSet");
    assert_eq!(cs.data["spec"]["replicas"], 4);
    let record: Value = serde_json::from_str(
        cs.annotations()
            .get(kruise_api::keys::MIGRATION_ANNOTATION)
            .expect("the move's record"),
    )
    .expect("record is JSON");
    assert_eq!(record["sourceReplicas"], 4, "{record}");

    // Rerunning the finished move changes nothing.
    let again = fx
        .run(&[
            "migrate",
            "CloneSet",
            "--from",
            "Deployment",
            "--src-name",
            "web",
            "--copy",
        ])
        .await;
    assert_code(&again, OK);
    assert_stdout(&again, "migrated 4 replicas");

    let done = wait_pod(
        &fx.pods,
        "client",
        "finished",
        Duration::from_secs(90),
        |p| {
            matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        },
    )
    .await
    .expect("client finished");
    let log = fx
        .pods
        .logs("client", &LogParams::default())
        .await
        .expect("client log");
    assert_eq!(
        done.status.and_then(|s| s.phase).as_deref(),
        Some("Succeeded"),
        "{log}"
    );
    let last = log.lines().last().unwrap_or_default();
    let ok: u32 = last
        .strip_prefix("ok=")
        .and_then(|rest| rest.strip_suffix(" fail=0"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no failed call:\n{log}"));
    // About 4 calls a second for the whole run, the move included.
    assert!(ok >= 100, "{ok} calls answered:\n{log}");
    fx.ns.delete().await.expect("delete ns");
}

/// `--dry-run` prints the CloneSet (YAML) and the steps and creates nothing; a missing source
/// (Deployment or StatefulSet) exits 6 naming --src-name; --max-surge 0 and a second --create
/// exit 2 naming the flag.
#[tokio::test]
async fn migrate_dry_run_and_refusals() {
    let fx = Fixture::new("e2e-cli-migrate-dry").await;
    create_deployment(&fx, "api", 2, template("api", "v1")).await;

    let dry = migrate(&fx, &["api", "--create", "--copy", "--dry-run"]).await;
    assert_code(&dry, OK);
    assert_stdout(&dry, "kind: CloneSet");
    assert_stdout(&dry, "name: api");
    assert_stdout(&dry, kruise_api::keys::MIGRATION_ANNOTATION);
    assert!(
        dry.stderr.contains("cloneset/api: replicas 0 -> 1"),
        "{dry}"
    );
    assert!(
        dry.stderr.contains("deployment/api: replicas 2 -> 1"),
        "{dry}"
    );
    assert!(dry.stderr.contains("dry run: nothing changed"), "{dry}");
    let cs_api: Api<DynamicObject> = Api::namespaced_with(
        fx.client.clone(),
        &fx.ns.name,
        &kruise_resource(&fx.client, "clonesets").await,
    );
    assert!(
        cs_api.get_opt("api").await.expect("get").is_none(),
        "dry run created nothing"
    );

    let missing = migrate(&fx, &["nope", "--create"]).await;
    assert_code(&missing, NOT_FOUND);
    assert!(
        missing.stderr.contains("deployment/nope not found")
            && missing.stderr.contains("--src-name"),
        "{missing}"
    );

    let surge = migrate(&fx, &["api", "--create", "--max-surge", "0"]).await;
    assert_code(&surge, USAGE);
    assert!(surge.stderr.contains("--max-surge"), "{surge}");

    let create = migrate(&fx, &["api", "--create"]).await;
    assert_code(&create, OK);
    assert_stdout(
        &create,
        "cloneset/api created from deployment/api with 0 replicas",
    );
    let cs = cs_api.get("api").await.expect("CloneSet created");
    assert_eq!(cs.data["spec"]["replicas"], 0);
    let twice = migrate(&fx, &["api", "--create"]).await;
    assert_code(&twice, USAGE);
    assert!(
        twice.stderr.contains("cloneset/api already exists") && twice.stderr.contains("--create"),
        "{twice}"
    );

    let sts = fx
        .run(&[
            "migrate",
            "AdvancedStatefulSet",
            "--from",
            "StatefulSet",
            "--src-name",
            "db",
        ])
        .await;
    assert_code(&sts, NOT_FOUND);
    assert!(
        sts.stderr.contains("statefulset/db not found") && sts.stderr.contains("--src-name"),
        "{sts}"
    );
    fx.ns.delete().await.expect("delete ns");
}

/// `migrate AdvancedStatefulSet --from StatefulSet`: the dry run prints the Advanced StatefulSet
/// and changes nothing; --dst-name, --replicas and --create alone are refused naming the flag;
/// the handover keeps every Pod (same UID, not restarted) and claim, the Advanced StatefulSet
/// adopts the StatefulSet's revision (the same name: the Pods count as updated) and later updates
/// the adopted Pods in place; a rerun after the handover only checks.
#[tokio::test]
async fn migrate_statefulset_to_advanced_statefulset_keeps_every_pod() {
    let fx = Fixture::new("e2e-cli-migrate-sts").await;
    let sts_api: Api<StatefulSet> = fx.ns.api();
    let sts: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "db", "labels": {"team": "e2e"}},
        "spec": {
            "replicas": 3, "serviceName": "db", "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "db"}},
            "template": template("db", "v1"),
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}}}]
        }
    }))
    .expect("StatefulSet");
    sts_api
        .create(&PostParams::default(), &sts)
        .await
        .expect("create StatefulSet");
    let names = ["db-0", "db-1", "db-2"];
    for n in names {
        wait_pod(&fx.pods, n, "Ready", Duration::from_secs(120), pod_ready)
            .await
            .expect("StatefulSet Pod Ready");
    }
    let native_revision = wait_for(
        "the StatefulSet's status",
        Duration::from_secs(60),
        || async {
            let s = sts_api.get("db").await?;
            Ok(s.status
                .filter(|st| st.ready_replicas == Some(3))
                .and_then(|st| st.update_revision))
        },
    )
    .await
    .expect("StatefulSet ready");
    let before = |pods: &[Pod]| -> Vec<(String, String)> {
        pods.iter()
            .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
            .collect()
    };
    let list = || async {
        let mut pods = fx
            .pods
            .list(&ListParams::default().labels("app=db"))
            .await
            .expect("pods")
            .items;
        pods.sort_by_key(|p| p.name_any());
        pods
    };
    let uids = before(&list().await);
    let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> = fx.ns.api();
    let claim_uids = |cs: Vec<k8s_openapi::api::core::v1::PersistentVolumeClaim>| -> Vec<String> {
        let mut v: Vec<String> = cs
            .iter()
            .map(|c| format!("{}={}", c.name_any(), c.uid().unwrap_or_default()))
            .collect();
        v.sort();
        v
    };
    let claims_before = claim_uids(
        claims
            .list(&ListParams::default())
            .await
            .expect("claims")
            .items,
    );
    assert_eq!(claims_before.len(), 3, "{claims_before:?}");

    let asts = |extra: &[&'static str]| {
        let mut a = vec![
            "migrate",
            "AdvancedStatefulSet",
            "--from",
            "StatefulSet",
            "--src-name",
            "db",
        ];
        a.extend_from_slice(extra);
        a
    };
    let dry = fx.run(&asts(&["--dry-run"])).await;
    assert_code(&dry, OK);
    assert_stdout(&dry, "apiVersion: apps.kruise.io/v1beta1");
    assert_stdout(&dry, "kind: StatefulSet");
    assert_stdout(&dry, "podUpdatePolicy: ReCreate");
    assert!(
        dry.stderr
            .contains("would delete statefulset/db with --cascade=orphan")
            && dry.stderr.contains("adopting db-0, db-1, db-2")
            && dry.stderr.contains("dry run: nothing changed"),
        "{dry}"
    );
    assert!(
        sts_api.get_opt("db").await.expect("get").is_some(),
        "dry run kept the StatefulSet"
    );
    for (extra, flag) in [
        (&["--dst-name", "other"][..], "--dst-name other"),
        (&["--replicas", "1"][..], "--replicas"),
        (&["--create"][..], "--create without --copy"),
    ] {
        let r = fx.run(&asts(extra)).await;
        assert_code(&r, USAGE);
        assert!(r.stderr.contains(flag), "{flag}: {r}");
    }

    let run = fx.run(&asts(&["--timeout", "50s"])).await;
    assert_code(&run, OK);
    assert_stdout(
        &run,
        "statefulset/db deleted with --cascade=orphan: its 3 Pods",
    );
    assert_stdout(
        &run,
        "took over 3 of 3 Pods in place (same UIDs, not restarted)",
    );
    assert!(!run.stdout.contains("recreated"), "{run}");
    assert!(
        sts_api.get_opt("db").await.expect("get").is_none(),
        "StatefulSet gone"
    );

    let ar = kruise_resource(&fx.client, "statefulsets").await;
    let asts_api: Api<DynamicObject> = Api::namespaced_with(fx.client.clone(), &fx.ns.name, &ar);
    let obj = asts_api.get("db").await.expect("Advanced StatefulSet");
    let asts_uid = obj.uid().expect("uid");
    assert_eq!(
        obj.data["status"]["updateRevision"],
        json!(native_revision),
        "the StatefulSet's revision is the Advanced StatefulSet's: {:?}",
        obj.data["status"]
    );
    let pods = list().await;
    assert_eq!(before(&pods), uids, "the same Pods");
    for p in &pods {
        assert_eq!(controller_kind(p), "StatefulSet");
        let owner = p
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .cloned()
            .expect("owner");
        assert_eq!(
            owner.uid,
            asts_uid,
            "{} controlled by the Advanced StatefulSet",
            p.name_any()
        );
        assert!(
            owner.api_version.starts_with("apps.kruise.io/"),
            "{owner:?}"
        );
        let restarts: i32 = p
            .status
            .iter()
            .flat_map(|s| s.container_statuses.iter().flatten())
            .map(|c| c.restart_count)
            .sum();
        assert_eq!(restarts, 0, "{} not restarted", p.name_any());
    }
    let revs: Api<ControllerRevision> = fx.ns.api();
    let rev = revs
        .get(&native_revision)
        .await
        .expect("the StatefulSet's revision kept");
    assert_eq!(
        rev.owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.clone()),
        Some(asts_uid.clone()),
        "the revision is adopted"
    );
    assert_eq!(
        claim_uids(
            claims
                .list(&ListParams::default())
                .await
                .expect("claims")
                .items
        ),
        claims_before,
        "the same claims"
    );

    // Rerun: the handover is recorded; it only checks.
    let again = fx.run(&asts(&[])).await;
    assert_code(&again, OK);
    assert_stdout(&again, "resuming the handover recorded on");
    assert_stdout(&again, "controls its 3 Pods, all Ready and updated");

    // The adopted Pods update in place from the adopted revision.
    asts_api
        .patch(
            "db",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {
                "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}}
            }})),
        )
        .await
        .expect("patch podUpdatePolicy");
    let set = fx
        .run(&[
            "set",
            "image",
            "asts/db",
            &format!("app={}", image("testapp", "v2")),
        ])
        .await;
    assert_code(&set, OK);
    assert_code(&fx.status("asts/db").await, OK);
    let after = list().await;
    assert_eq!(before(&after), uids, "updated in place: the same Pods");
    for p in &after {
        let st = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .expect("status");
        assert!(
            st.image.ends_with("testapp:v2"),
            "{}: {}",
            p.name_any(),
            st.image
        );
        assert_eq!(
            st.restart_count,
            1,
            "{} restarted in place once",
            p.name_any()
        );
    }
    fx.ns.delete().await.expect("delete ns");
}
