//! CustomResourceDefinitions swapped as a user moving between OpenKruise and Kruise-rs swaps them:
//! OpenKruise v1.9's from its source (`hack/build-openkruise.sh --source` fetches and caches it),
//! ours from `deploy/crds/`, each replaced whole (`kubectl replace -f`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::PostParams;
use kube::{Api, Client};

use crate::{Result, wait_for};

fn other(msg: String) -> crate::Error {
    crate::Error::Io(std::io::Error::other(msg))
}

/// OpenKruise v1.9's CRDs (`config/crd/bases` of its source), fetched by
/// `hack/build-openkruise.sh --source` into the cache on first use (one module download).
pub fn openkruise_crd_dir() -> Result<PathBuf> {
    let script = crate::repo_root().join("hack/build-openkruise.sh");
    let out = Command::new(&script).arg("--source").output()?;
    if !out.status.success() {
        return Err(other(format!(
            "{} --source failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let src = String::from_utf8_lossy(&out.stdout);
    let dir = PathBuf::from(src.lines().last().unwrap_or_default().trim()).join("config/crd/bases");
    if !dir.is_dir() {
        return Err(other(format!("{} is not a directory", dir.display())));
    }
    Ok(dir)
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
