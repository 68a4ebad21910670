//! The krew manifest names an archive layout; this packs the archive the release script makes
//! (with the binary cargo built for this test) and checks every name the manifest uses in it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(root().join("cli/krew/kruise.yaml")).expect("manifest");
    serde_saphyr::from_str(&text).expect("manifest is YAML")
}

#[test]
fn manifest_version_and_uris_match_the_crate() {
    let m = manifest();
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(
        m["metadata"]["name"], "kruise",
        "krew names the plugin kruise"
    );
    assert_eq!(m["spec"]["version"], version.as_str());
    let platforms = m["spec"]["platforms"].as_array().expect("platforms");
    assert!(!platforms.is_empty());
    for p in platforms {
        let os = p["selector"]["matchLabels"]["os"].as_str().expect("os");
        let arch = p["selector"]["matchLabels"]["arch"].as_str().expect("arch");
        let uri = p["uri"].as_str().expect("uri");
        assert!(
            uri.ends_with(&format!("/{version}/kubectl-kruise-{os}-{arch}.tar.gz")),
            "{uri} is not the archive hack/release-archive.sh names for {os}/{arch} at {version}"
        );
        assert_eq!(p["bin"], "kubectl-kruise");
    }
}

#[test]
fn archive_holds_what_the_manifest_names() {
    let out = std::env::temp_dir().join(format!("krew-archive-{}", std::process::id()));
    let run = Command::new(root().join("hack/release-archive.sh"))
        .arg(&out)
        .env("KRUISE_ARCHIVE_BIN", env!("CARGO_BIN_EXE_kubectl-kruise"))
        .output()
        .expect("hack/release-archive.sh runs");
    assert!(
        run.status.success(),
        "release-archive.sh failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let mut lines = stdout.lines();
    let archive = PathBuf::from(lines.next().expect("archive path"));
    let sha = lines.next().expect("sha256");
    assert_eq!(sha.len(), 64, "sha256 line {sha:?}");

    let name = archive.file_name().and_then(|n| n.to_str()).expect("name");
    let m = manifest();
    let platform = m["spec"]["platforms"]
        .as_array()
        .expect("platforms")
        .iter()
        .find(|p| p["uri"].as_str().is_some_and(|u| u.ends_with(name)))
        .unwrap_or_else(|| panic!("the manifest has no platform whose uri ends with {name}"))
        .clone();

    let listing = Command::new("tar")
        .arg("-tzf")
        .arg(&archive)
        .output()
        .expect("tar lists the archive");
    assert!(listing.status.success());
    let entries: Vec<String> = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    for f in platform["files"].as_array().expect("files") {
        let from = f["from"].as_str().expect("from");
        assert!(
            entries.iter().any(|e| e == from),
            "manifest copies {from} but the archive holds {entries:?}"
        );
    }

    // Unpacked, the bin runs: it is the plugin, not a placeholder.
    let dir = out.join("unpacked");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let untar = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&dir)
        .status()
        .expect("tar extracts");
    assert!(untar.success());
    let bin = dir.join(platform["bin"].as_str().expect("bin"));
    let version = Command::new(&bin)
        .arg("--version")
        .output()
        .expect("bin runs");
    assert!(version.status.success());
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("kubectl-kruise {}", env!("CARGO_PKG_VERSION"))
    );
    let _ = std::fs::remove_dir_all(&out);
}
