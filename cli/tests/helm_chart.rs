//! The Helm chart is generated from deploy/ (hack/helm-chart.py): these fail when the committed
//! chart drifts from deploy/, when `helm lint` objects, or when the default values render other
//! objects than deploy/ holds. Helm is built from its Go module by hack/build-helm.sh (cached).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn helm() -> PathBuf {
    let out = run(&mut Command::new(root().join("hack/build-helm.sh")));
    PathBuf::from(out.lines().last().expect("helm path").trim())
}

#[test]
fn chart_templates_match_deploy() {
    run(Command::new("python3")
        .arg(root().join("hack/helm-chart.py"))
        .arg("--check"));
}

#[test]
fn chart_lints_and_renders_deploy_with_default_values() {
    let helm = helm();
    let chart = root().join("deploy/helm/kruise-rs");
    run(Command::new(&helm).arg("lint").arg(&chart));
    let rendered = run(Command::new(&helm)
        .args(["template", "kruise-rs"])
        .arg(&chart));
    let file = std::env::temp_dir().join(format!("kruise-rs-chart-{}.yaml", std::process::id()));
    std::fs::write(&file, &rendered).expect("write rendered chart");
    let compared = Command::new("python3")
        .arg(root().join("hack/helm-chart.py"))
        .arg("--compare")
        .arg(&file)
        .output()
        .expect("compare runs");
    let _ = std::fs::remove_file(&file);
    assert!(
        compared.status.success(),
        "{}",
        String::from_utf8_lossy(&compared.stdout)
    );
}

#[test]
fn values_reach_the_objects() {
    let helm = helm();
    let chart = root().join("deploy/helm/kruise-rs");
    let rendered = run(Command::new(&helm)
        .args(["template", "kruise-rs"])
        .arg(&chart)
        .args([
            "--set",
            "manager.replicas=3",
            "--set",
            "manager.image.repository=reg.example/kr/kruise-manager",
            "--set",
            "manager.image.tag=v9.9.9",
            "--set",
            "manager.resources.limits.memory=1Gi",
            "--set",
            "daemon.socketLocation=/run",
            "--set",
            "webhookConfiguration.failurePolicy.pods=Ignore",
            "--set",
            "featureGates=PodWebhook=true",
        ]));
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&rendered).expect("YAML");
    let manager = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("manager Deployment");
    assert_eq!(manager["spec"]["replicas"], 3);
    let c = &manager["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "reg.example/kr/kruise-manager:v9.9.9");
    assert_eq!(c["resources"]["limits"]["memory"], "1Gi");
    assert!(
        c["args"]
            .as_array()
            .expect("args")
            .iter()
            .any(|a| a == "--feature-gates=PodWebhook=true")
    );
    assert!(c["env"].as_array().expect("env").iter().any(|e| e["name"]
        == kruise_api::keys::ENV_WEBHOOK_POD_FAILURE_POLICY
        && e["value"] == "Ignore"));
    let daemon = docs
        .iter()
        .find(|d| d["kind"] == "DaemonSet")
        .expect("daemon");
    assert_eq!(
        daemon["spec"]["template"]["spec"]["volumes"][0]["hostPath"]["path"],
        "/run/containerd"
    );
    assert_eq!(
        daemon["spec"]["template"]["spec"]["containers"][0]["image"],
        "reg.example/kr/kruise-daemon:v9.9.9",
        "the daemon image follows manager.image"
    );
    assert!(
        daemon["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .expect("args")
            .iter()
            .any(|a| a == "--feature-gates=PodWebhook=true")
    );
}

/// The args of the manager and daemon containers when the chart renders with `set`.
fn gate_args(set: &[&str]) -> Vec<Vec<String>> {
    let chart = root().join("deploy/helm/kruise-rs");
    let mut cmd = Command::new(helm());
    cmd.args(["template", "kruise-rs"]).arg(&chart);
    for s in set {
        cmd.args(["--set", s]);
    }
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&run(&mut cmd)).expect("YAML");
    ["Deployment", "DaemonSet"]
        .iter()
        .map(|kind| {
            let d = docs.iter().find(|d| d["kind"] == *kind).expect(kind);
            d["spec"]["template"]["spec"]["containers"][0]["args"]
                .as_array()
                .expect("args")
                .iter()
                .filter_map(|a| a.as_str())
                .filter(|a| a.starts_with(kruise_api::features::FLAG))
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

#[test]
fn feature_gates_are_ours_by_default_and_exactly_the_users_when_set() {
    let shipped = format!(
        "{}={}",
        kruise_api::features::FLAG,
        kruise_api::features::shipped().to_flag()
    );
    assert_eq!(gate_args(&[]), vec![vec![shipped.clone()], vec![shipped]]);
    // OpenKruise's values: featureGates "" means its defaults, so no flag at all.
    assert_eq!(
        gate_args(&["featureGates="]),
        vec![Vec::<String>::new(), vec![]]
    );
    let theirs = "--feature-gates=PreDownloadImageForInPlaceUpdate=true".to_owned();
    assert_eq!(
        gate_args(&["featureGates=PreDownloadImageForInPlaceUpdate=true"]),
        vec![vec![theirs.clone()], vec![theirs]]
    );
}

/// `helm uninstall` keeps the CRDs (and so every object users made), and its pre-delete hook
/// refuses while Kruise objects exist unless told otherwise.
#[test]
fn crds_are_kept_and_the_pre_delete_hook_guards_objects() {
    let chart = root().join("deploy/helm/kruise-rs");
    let render = |set: &[&str]| -> Vec<serde_json::Value> {
        let mut cmd = Command::new(helm());
        cmd.args(["template", "kruise-rs"]).arg(&chart);
        for s in set {
            cmd.args(["--set", s]);
        }
        serde_saphyr::from_multiple(&run(&mut cmd)).expect("YAML")
    };
    let docs = render(&["manager.image.repository=reg.example/kr/kruise-manager"]);
    let crds: Vec<&serde_json::Value> = docs
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .collect();
    assert!(!crds.is_empty());
    for crd in &crds {
        assert_eq!(
            crd["metadata"]["annotations"]["helm.sh/resource-policy"], "keep",
            "{}",
            crd["metadata"]["name"]
        );
    }
    let job_args = |docs: &[serde_json::Value]| -> Option<Vec<String>> {
        let job = docs.iter().find(|d| d["kind"] == "Job")?;
        assert_eq!(job["metadata"]["annotations"]["helm.sh/hook"], "pre-delete");
        let c = &job["spec"]["template"]["spec"]["containers"][0];
        assert!(
            c["image"]
                .as_str()
                .is_some_and(|i| i.starts_with("reg.example/kr/kruise-manager:")),
            "the hook runs the manager image: {c}"
        );
        Some(serde_json::from_value(c["args"].clone()).expect("args"))
    };
    assert_eq!(job_args(&docs), Some(vec!["--pre-delete-hook".to_owned()]));
    let allow = render(&[
        "manager.image.repository=reg.example/kr/kruise-manager",
        "helmHooks.refuseWhileObjectsExist=false",
    ]);
    assert_eq!(
        job_args(&allow),
        Some(vec![
            "--pre-delete-hook".to_owned(),
            "--allow-objects".to_owned()
        ])
    );
    assert_eq!(job_args(&render(&["helmHooks.preDelete=false"])), None);
}

/// values.schema.json: OpenKruise 1.9's names that Kruise-rs honours take any value of their type,
/// the others only the value that means what Kruise-rs does; another value of one Kruise-rs does
/// not honour, a malformed one, or an unknown name, is refused by name.
#[test]
fn the_schema_refuses_what_would_be_ignored_by_name() {
    let chart = root().join("deploy/helm/kruise-rs");
    let template = |set: &str| {
        Command::new(helm())
            .args(["template", "kruise-rs"])
            .arg(&chart)
            .args(["--set", set])
            .output()
            .expect("helm template")
    };
    for ok in [
        "installation.namespace=kruise-system",
        "crds.managed=true",
        "manager.log.level=4",
        "daemon.log.level=debug",
        "daemon.image.repository=reg.example/kruise-daemon",
        "imagePullSecrets[0].name=regcred",
        "manager.nodeSelector.disk=ssd",
        "daemon.socketFile=crio/crio.sock",
    ] {
        let out = template(ok);
        assert!(
            out.status.success(),
            "{ok}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for (bad, named) in [
        ("imagePullSecrets[0].secret=regcred", "/imagePullSecrets/0"),
        ("manager.hostNetwork=true", "/manager/hostNetwork"),
        (
            "webhookConfiguration.timeoutSeconds=30",
            "/webhookConfiguration/timeoutSeconds",
        ),
        ("installation.namespace=kruise", "/installation/namespace"),
        ("daemon.socketFile=../etc/crio.sock", "/daemon/socketFile"),
        ("daemon.socketFile=/run/crio.sock", "/daemon/socketFile"),
        ("manager.log.level=loud", "/manager/log/level"),
        ("daemon.tolerations[0].operator=Exists", "tolerations"),
        ("nosuchvalue=1", "nosuchvalue"),
    ] {
        let out = template(bad);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(named), "{bad}: {err}");
    }
}

/// Issue 59: a values file in OpenKruise's names (deploy/helm/openkruise-values.yaml) renders
/// each value where OpenKruise's chart puts it, and `crds.managed=false` renders no CRD.
#[test]
fn openkruise_values_land_where_openkruise_puts_them() {
    let chart = root().join("deploy/helm/kruise-rs");
    let render = |args: &[&str]| -> Vec<serde_json::Value> {
        let mut cmd = Command::new(helm());
        cmd.args(["template", "kruise-rs"]).arg(&chart).args(args);
        serde_saphyr::from_multiple(&run(&mut cmd)).expect("YAML")
    };
    let values = root().join("deploy/helm/openkruise-values.yaml");
    let docs = render(&["-f", values.to_str().expect("path")]);
    let kind = |k: &str| docs.iter().find(|d| d["kind"] == k).expect(k);
    let pod = |k: &str| kind(k)["spec"]["template"]["spec"].clone();
    let secrets = serde_json::json!([{"name": "regcred"}]);
    let linux = serde_json::json!({"kubernetes.io/os": "linux"});
    for k in ["Deployment", "Job"] {
        let p = pod(k);
        assert_eq!(p["imagePullSecrets"], secrets, "{k}");
        assert_eq!(p["nodeSelector"], linux, "{k}");
        assert_eq!(p["tolerations"][0]["key"], "dedicated", "{k}");
        assert_eq!(
            p["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                [0]["matchExpressions"][0]["key"],
            "kubernetes.io/arch",
            "{k}"
        );
    }
    let manager = pod("Deployment");
    let env = |c: &serde_json::Value, name: &str| -> Option<String> {
        c["env"]
            .as_array()?
            .iter()
            .find(|e| e["name"] == name)
            .and_then(|e| e["value"].as_str().map(str::to_owned))
    };
    assert_eq!(
        env(&manager["containers"][0], "RUST_LOG").as_deref(),
        Some("info,kruise=debug"),
        "manager.log.level 5"
    );
    let daemon = pod("DaemonSet");
    assert_eq!(daemon["imagePullSecrets"], secrets);
    assert_eq!(daemon["nodeSelector"], linux);
    assert_eq!(
        daemon["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["values"][0],
        "virtual-kubelet"
    );
    assert_eq!(
        daemon["tolerations"],
        serde_json::json!([{"operator": "Exists"}]),
        "the daemon still tolerates every taint"
    );
    let c = &daemon["containers"][0];
    assert!(
        c["args"]
            .as_array()
            .expect("args")
            .iter()
            .any(|a| a == "--socket-file=containerd/containerd.sock"),
        "{c}"
    );
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/hostvarrun/containerd");
    assert_eq!(
        daemon["volumes"][0]["hostPath"]["path"],
        "/var/run/containerd"
    );
    assert_eq!(c["resources"]["limits"]["memory"], "200Mi");
    assert_eq!(c["resources"]["requests"]["cpu"], "10m");
    assert_eq!(env(c, "HTTPS_PROXY").as_deref(), Some("http://proxy:3128"));
    assert_eq!(env(c, "RUST_LOG").as_deref(), Some("info,kruise=trace"));
    assert!(
        c["env"]
            .as_array()
            .expect("env")
            .iter()
            .any(|e| e["name"] == "NODE_NAME")
    );
    for sa in docs.iter().filter(|d| {
        d["kind"] == "ServiceAccount"
            && (d["metadata"]["name"] == "kruise-manager"
                || d["metadata"]["name"] == "kruise-daemon")
    }) {
        assert_eq!(
            sa["metadata"]["annotations"]["example.com/role"], "kruise",
            "{}",
            sa["metadata"]["name"]
        );
    }

    // A socket file at the top of socketLocation: that whole directory is the daemon's run
    // directory.
    let top = render(&[
        "--set",
        "daemon.socketLocation=/run/containerd",
        "--set",
        "daemon.socketFile=containerd.sock",
    ]);
    let d = &top
        .iter()
        .find(|d| d["kind"] == "DaemonSet")
        .expect("daemon")["spec"]["template"]["spec"];
    assert_eq!(d["volumes"][0]["hostPath"]["path"], "/run/containerd");
    assert_eq!(
        d["containers"][0]["volumeMounts"][0]["mountPath"],
        "/hostvarrun"
    );

    let no_crds = render(&["--set", "crds.managed=false"]);
    assert!(
        no_crds
            .iter()
            .all(|d| d["kind"] != "CustomResourceDefinition")
    );
    assert!(no_crds.iter().any(|d| d["kind"] == "Deployment"));
}

/// deletionProtection.listAllResources is the one switch granting the manager upstream's `list`
/// on every resource (deploy/overlays/crd-cascading): off by default, rendering nothing; on, a
/// ClusterRole with exactly that rule bound to the manager's ServiceAccount.
#[test]
fn list_all_resources_is_off_by_default_and_one_value_turns_it_on() {
    let chart = root().join("deploy/helm/kruise-rs");
    let render = |set: &[&str]| -> Vec<serde_json::Value> {
        let mut cmd = Command::new(helm());
        cmd.args(["template", "kruise-rs"]).arg(&chart);
        for s in set {
            cmd.args(["--set", s]);
        }
        serde_saphyr::from_multiple(&run(&mut cmd)).expect("YAML")
    };
    let named = |docs: &[serde_json::Value], kind: &str| -> Option<serde_json::Value> {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == "kruise-manager-list-all")
            .cloned()
    };
    let default = render(&[]);
    assert_eq!(named(&default, "ClusterRole"), None);
    assert_eq!(named(&default, "ClusterRoleBinding"), None);
    let on = render(&["deletionProtection.listAllResources=true"]);
    let role = named(&on, "ClusterRole").expect("ClusterRole kruise-manager-list-all");
    assert_eq!(
        role["rules"],
        serde_json::json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]}])
    );
    let binding = named(&on, "ClusterRoleBinding").expect("its binding");
    assert_eq!(binding["roleRef"]["name"], "kruise-manager-list-all");
    assert_eq!(
        binding["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": "kruise-manager",
            "namespace": "kruise-system"}])
    );
    assert_eq!(on.len(), default.len() + 2, "nothing else changes");
}
