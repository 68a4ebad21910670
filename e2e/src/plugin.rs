//! What the plugin's e2e files share: a namespace with a `kubectl-kruise` bound to it, the
//! exit-code and output checks, and a Pod template that is ready once it serves HTTP.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kube::api::ApiResource;
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::cli::{Kruise, Run};
use crate::{TestNamespace, client, image};

/// Hard limit on one watching CLI run, above its own `--timeout`.
pub const CLI_LIMIT: Duration = Duration::from_secs(300);

pub fn assert_code(run: &Run, code: i32) {
    assert_eq!(run.code, Some(code), "expected exit {code}: {run}");
}

pub fn assert_stdout(run: &Run, needle: &str) {
    assert!(
        run.stdout.contains(needle),
        "stdout lacks {needle:?}: {run}"
    );
}

/// A test namespace and the plugin run with `--kubeconfig` and `-n` set to it.
pub struct Fixture {
    pub client: Client,
    pub ns: TestNamespace,
    pub pods: Api<Pod>,
    pub kk: Kruise,
}

impl Fixture {
    pub async fn new(prefix: &str) -> Fixture {
        // Before creating anything, so a missing binary leaves no namespace behind.
        crate::cli::binary().expect("kubectl-kruise binary");
        let client = client().await.expect("cluster");
        let ns = TestNamespace::create(&client, prefix)
            .await
            .expect("test namespace");
        let kk = Kruise::new(&ns.name).expect("kubectl-kruise binary and kubeconfig");
        Fixture {
            pods: ns.api(),
            kk,
            ns,
            client,
        }
    }

    /// `rollout status TARGET` to its end (watching, 4 minutes at most).
    pub async fn status(&self, target: &str) -> Run {
        self.kk
            .run_for(&["rollout", "status", target, "--timeout", "4m"], CLI_LIMIT)
            .await
            .expect("run rollout status")
    }

    /// A command expected to return promptly.
    pub async fn run(&self, args: &[&str]) -> Run {
        self.kk.run(args).await.expect("run kubectl-kruise")
    }

    /// `describe TARGET -o json`, which must exit 0, parsed; the text form must exit 0 too and
    /// is returned beside it.
    pub async fn describe(&self, target: &str) -> (serde_json::Value, String) {
        let run = self.run(&["describe", target, "-o", "json"]).await;
        assert_code(&run, 0);
        let doc = serde_json::from_str(run.stdout.trim()).expect("describe -o json");
        let text = self.run(&["describe", target]).await;
        assert_code(&text, 0);
        (doc, text.stdout)
    }
}

/// The Pod names of `describe -o json`'s group with `role`, in order.
pub fn described_pods(doc: &serde_json::Value, role: &str) -> Vec<String> {
    doc["podGroups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| g["role"] == role)
        .flat_map(|g| g["pods"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect()
}

/// The served `apps.kruise.io` resource `plural`, at the group's preferred version; panics when
/// the cluster does not serve it (a missing CRD is a failure, not a skip).
pub async fn kruise_resource(client: &Client, plural: &str) -> ApiResource {
    let group = kube::discovery::group(client, keys::APPS_GROUP)
        .await
        .expect("the cluster serves apps.kruise.io");
    group
        .versioned_resources(group.preferred_version_or_latest())
        .into_iter()
        .find(|(ar, _)| ar.plural == plural)
        .map(|(ar, _)| ar)
        .unwrap_or_else(|| panic!("the cluster serves no apps.kruise.io {plural}"))
}

/// A Pod template running testapp `tag` as container `app`, ready once it serves HTTP.
pub fn template(app: &str, tag: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app",
                "image": image("testapp", tag),
                "ports": [{"containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}
            }]
        }
    })
}
