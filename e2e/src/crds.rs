//! CustomResourceDefinitions swapped as a user moving between OpenKruise and Kruise-rs swaps them:
//! OpenKruise v1.9.0's as released (tag v1.9.0), shaped from the facts file
//! `api/tests/data/openkruise-v1.9.0.json` (`hack/openkruise-facts.py` reads it from the tag), and
//! ours from `deploy/crds/`, each replaced whole (`kubectl replace -f`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::PostParams;
use kube::{Api, Client};
use serde::Deserialize;

use crate::{Result, wait_for};

fn other(msg: String) -> crate::Error {
    crate::Error::Io(std::io::Error::other(msg))
}

/// What the facts file says about one release.
#[derive(Clone, Debug, Deserialize)]
pub struct Facts {
    /// The tag read (`v1.9.0`).
    #[serde(rename = "ref")]
    pub reference: String,
    /// The commit the tag names.
    pub commit: String,
    /// Per CRD name.
    pub crds: BTreeMap<String, CrdFacts>,
    /// Per gate name.
    #[serde(rename = "featureGates")]
    pub feature_gates: BTreeMap<String, GateFacts>,
}

/// One CRD of the release.
#[derive(Clone, Debug, Deserialize)]
pub struct CrdFacts {
    /// Its file name in `config/crd/bases` (ours in `deploy/crds/` has the same).
    pub file: String,
    pub group: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    /// `Webhook` or `None`, as the release installs it.
    pub conversion: String,
    pub versions: Vec<VersionFacts>,
}

/// One version of a CRD of the release.
#[derive(Clone, Debug, Deserialize)]
pub struct VersionFacts {
    pub name: String,
    pub served: bool,
    pub storage: bool,
    /// Field paths of its schema (`/spec/a[]/b`, `{}` map values, `/*` kept as written).
    pub fields: Vec<String>,
}

/// A feature gate of the release.
#[derive(Clone, Debug, Deserialize)]
pub struct GateFacts {
    pub default: bool,
    pub stage: String,
}

impl CrdFacts {
    /// The release's storage version.
    pub fn storage(&self) -> Option<&str> {
        self.versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.as_str())
    }
}

/// OpenKruise v1.9.0's facts (offline: the file is checked in).
pub fn release_facts() -> Result<Facts> {
    let path = crate::repo_root().join("api/tests/data/openkruise-v1.9.0.json");
    let text = std::fs::read_to_string(&path)?;
    serde_json::from_str(&text).map_err(|e| other(format!("{}: {e}", path.display())))
}

/// Our CRD `ours` as the release installs it: the release's versions only, served and stored
/// as there, converted through the webhook only where the release does (our schemas: the
/// field tests compare those with the release's).
pub fn release_shaped(
    ours: &CustomResourceDefinition,
    facts: &CrdFacts,
) -> CustomResourceDefinition {
    let mut crd = ours.clone();
    crd.status = None;
    crd.spec
        .versions
        .retain(|v| facts.versions.iter().any(|f| f.name == v.name));
    for v in &mut crd.spec.versions {
        if let Some(f) = facts.versions.iter().find(|f| f.name == v.name) {
            v.served = f.served;
            v.storage = f.storage;
        }
    }
    if facts.conversion != "Webhook" {
        crd.spec.conversion = None;
    }
    crd
}

/// Our CRD `ours` as the build before the release's storage versions shipped it: storing
/// `version` (v1beta1), everything else the same.
pub fn storing(ours: &CustomResourceDefinition, version: &str) -> CustomResourceDefinition {
    let mut crd = ours.clone();
    crd.status = None;
    for v in &mut crd.spec.versions {
        v.storage = v.name == version;
    }
    crd
}

/// Our CRDs as shipped.
pub fn our_crd_dir() -> PathBuf {
    crate::repo_root().join("deploy/crds")
}

/// The CRD of `file` (`apps.kruise.io_clonesets.yaml`) in `dir`.
pub fn read(dir: &Path, file: &str) -> Result<CustomResourceDefinition> {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path)?;
    serde_saphyr::from_str(&text).map_err(|e| other(format!("{}: {e}", path.display())))
}

/// The storage version of a CRD.
pub fn storage_version(crd: &CustomResourceDefinition) -> Option<&str> {
    crd.spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.as_str())
}

/// Replaces the cluster's CRD of that name with `crd` whole (creates it when missing) and waits
/// until it is Established with `crd`'s versions.
pub async fn replace(client: &Client, crd: &CustomResourceDefinition) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.metadata.name.clone().unwrap_or_default();
    let mut body = crd.clone();
    body.status = None;
    match api.get_opt(&name).await? {
        Some(live) => {
            body.metadata.resource_version = live.metadata.resource_version;
            // Keep the caBundle the manager wrote, as `kubectl apply --server-side` would (the
            // manager owns that field): the swap is about versions, not about the webhook's CA.
            let live_ca = live
                .spec
                .conversion
                .and_then(|c| c.webhook)
                .and_then(|w| w.client_config)
                .and_then(|c| c.ca_bundle);
            if let Some(cc) = body
                .spec
                .conversion
                .as_mut()
                .and_then(|c| c.webhook.as_mut())
                .and_then(|w| w.client_config.as_mut())
                && cc.ca_bundle.is_none()
            {
                cc.ca_bundle = live_ca;
            }
            api.replace(&name, &PostParams::default(), &body).await?;
        }
        None => {
            api.create(&PostParams::default(), &body).await?;
        }
    }
    let want: Vec<String> = crd.spec.versions.iter().map(|v| v.name.clone()).collect();
    wait_for(
        &format!("CRD {name} established with versions {want:?}"),
        Duration::from_secs(60),
        || async {
            let live = api.get(&name).await?;
            let versions: Vec<String> = live.spec.versions.iter().map(|v| v.name.clone()).collect();
            let established = live
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
            Ok((established && versions == want).then_some(()))
        },
    )
    .await
}

/// Puts our CRDs of `files` back when dropped, unless [`OursBack::done`] was called: a test that
/// swaps CRDs cluster-wide must not leave another system's behind, even when it fails.
pub struct OursBack {
    files: Vec<String>,
    done: bool,
}

impl OursBack {
    pub fn new(files: &[&str]) -> Self {
        Self {
            files: files.iter().map(|f| (*f).to_owned()).collect(),
            done: false,
        }
    }

    /// Replaces the CRDs with ours now.
    pub async fn restore(mut self, client: &Client) -> Result<()> {
        self.done = true;
        restore_files(client, &self.files).await
    }
}

async fn restore_files(client: &Client, files: &[String]) -> Result<()> {
    let dir = our_crd_dir();
    for f in files {
        replace(client, &read(&dir, f)?).await?;
    }
    Ok(())
}

impl Drop for OursBack {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let files = std::mem::take(&mut self.files);
        // A failing test unwinds through here: restore on a runtime of its own, since the test's
        // runtime cannot be blocked on from inside it.
        let restored = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async { restore_files(&crate::client().await?, &files).await })
        })
        .join();
        match restored {
            Ok(Ok(())) => eprintln!("our CRDs are installed again"),
            Ok(Err(e)) => eprintln!("putting our CRDs back failed: {e}"),
            Err(_) => eprintln!("putting our CRDs back panicked"),
        }
    }
}
