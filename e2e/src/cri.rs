//! The node's container runtime as CRI reports it, so tests can check Kruise's reports (NodeImage
//! imageIDs, runtime-containers-meta, recreated containers) against the source of truth. Also
//! pushes fresh image tags to the local registry, so a pull test can be sure the node lacks them.

use std::io::Read;
use std::path::PathBuf;
use std::process::Command;

use kruise_daemon::criruntime::{ContainerInfo, CriClient};
use rand::RngCore;

use crate::{Error, Result};

/// The runtime socket of the local cluster; `KRUISE_E2E_CRI_SOCKET` overrides it.
pub fn socket() -> PathBuf {
    std::env::var_os("KRUISE_E2E_CRI_SOCKET")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/containerd/containerd.sock"))
}

fn cri_err(e: impl std::fmt::Display) -> Error {
    Error::NoCluster(format!("CRI: {e}"))
}

/// A CRI client for the node the suite runs on.
pub async fn connect() -> Result<CriClient> {
    CriClient::connect_path(&socket()).await.map_err(cri_err)
}

/// The image ID (`sha256:…`) the runtime has for `image`, `None` when it does not have it.
pub async fn image_id(cri: &CriClient, image: &str) -> Result<Option<String>> {
    Ok(cri
        .image_status(image)
        .await
        .map_err(cri_err)?
        .map(|i| i.id))
}

/// The newest container with this name in the pod (the one the kubelet reports).
pub async fn container(
    cri: &CriClient,
    pod_uid: &str,
    name: &str,
) -> Result<Option<ContainerInfo>> {
    let all = cri.pod_containers(pod_uid).await.map_err(cri_err)?;
    Ok(all
        .iter()
        .filter(|c| c.name == name)
        .max_by_key(|c| c.created_at)
        .cloned())
}

/// `containerd://<id>`: the form the kubelet and runtime-containers-meta use.
pub fn full_id(cri: &CriClient, c: &ContainerInfo) -> String {
    format!("{}://{}", cri.runtime_name(), c.id)
}

/// Pushes `kruise-rs/testapp:<tag>` with one layer of `size` random bytes (a unique image the
/// node cannot have) and returns the full reference. A big layer makes the pull take a while.
pub fn push_unique_image(tag: &str, size: usize) -> Result<String> {
    let dir = std::env::temp_dir().join(format!("kruise-e2e-layer-{tag}"));
    std::fs::create_dir_all(&dir)?;
    // Random bytes, so no two such images share a layer; from the kernel, which is faster than a
    // debug build's generator for the hundreds of MiB the big-pull test asks for.
    let mut data = vec![0u8; size.max(64)];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut data)?;
    std::fs::write(dir.join("payload"), &data)?;
    let out = Command::new("python3")
        .arg(crate::repo_root().join("hack/oci_image.py"))
        .args(["--registry", &crate::registry()])
        // Random bytes do not compress: storing them saves the time of a gzip pass.
        .args(["--gzip-level", "0"])
        .args(["--name", "kruise-rs/testapp", "--tag", tag, "--layer"])
        .arg(&dir)
        .output()?;
    let _ = std::fs::remove_dir_all(&dir);
    if !out.status.success() {
        return Err(Error::NoCluster(format!(
            "pushing testapp:{tag} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(crate::image("testapp", tag))
}

/// A tag no test used before.
pub fn unique_tag(prefix: &str) -> String {
    format!("{prefix}-{:08x}", rand::rng().next_u32())
}

/// Removes `image` from the runtime (through `ctr`, which talks to containerd directly), so big
/// test images do not pile up on the node; containerd then collects its layers.
pub fn remove_image(image: &str) -> Result<()> {
    let out = Command::new("ctr")
        .args(["-n", "k8s.io", "--address"])
        .arg(socket())
        .args(["images", "rm", image])
        .output()?;
    if !out.status.success() {
        return Err(Error::NoCluster(format!(
            "ctr images rm {image}: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}
