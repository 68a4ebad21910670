//! Embeds the manifests of `deploy/` (the files `deploy/kustomization.yaml` lists, in its order)
//! so `install`, `dev` and `check` ship exactly what the repository deploys.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let deploy = Path::new(&manifest_dir).join("../deploy");
    let kustomization = deploy.join("kustomization.yaml");
    println!("cargo:rerun-if-changed={}", kustomization.display());
    let text = std::fs::read_to_string(&kustomization)
        .unwrap_or_else(|e| panic!("reading {}: {e}", kustomization.display()));
    let mut out = String::from("/// `(path under deploy/, contents)` in kustomization order.\n");
    out.push_str("pub const MANIFESTS: &[(&str, &str)] = &[\n");
    let mut in_resources = false;
    for line in text.lines() {
        if !line.starts_with(' ') && !line.starts_with('-') {
            in_resources = line.trim_end() == "resources:";
            continue;
        }
        let Some(item) = line.trim().strip_prefix("- ") else {
            continue;
        };
        if !in_resources {
            continue;
        }
        let path = deploy.join(item.trim());
        println!("cargo:rerun-if-changed={}", path.display());
        let abs = path
            .canonicalize()
            .unwrap_or_else(|e| panic!("deploy/kustomization.yaml lists {item}: {e}"));
        let _ = writeln!(
            out,
            "    ({:?}, include_str!({:?})),",
            item.trim(),
            abs.display().to_string()
        );
    }
    out.push_str("];\n");
    let dest =
        Path::new(&std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into())).join("manifests.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("writing {}: {e}", dest.display()));
}
