//! What `install`, `uninstall`, `check` and `dev` share: the manifests of `deploy/` embedded at
//! build time, applying and deleting them, and finding out what Kruise runs on a cluster.

pub mod cluster;

use serde_json::Value;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/manifests.rs"));
}

pub use embedded::MANIFESTS;

/// Image names in `deploy/` that `--image-repo`/`--version` replace.
pub const MANAGER_IMAGE: &str = "kruise-rs/kruise-manager";
/// See [`MANAGER_IMAGE`].
pub const DAEMON_IMAGE: &str = "kruise-rs/kruise-daemon";
/// The tag `deploy/` names (what `hack/build-images.sh` pushes by default).
pub const DEFAULT_TAG: &str = "dev";
/// Label naming the version an object was installed at.
pub const VERSION_LABEL: &str = "app.kubernetes.io/version";
/// Label every object of `deploy/` carries.
pub const PART_OF_LABEL: &str = "app.kubernetes.io/part-of";
/// Its value for Kruise-rs.
pub const PART_OF_VALUE: &str = "kruise-rs";
/// Field manager of the plugin's server-side applies.
pub const FIELD_MANAGER: &str = "kubectl-kruise";
/// The manager's Deployment (ours and OpenKruise's chart use this name).
pub const MANAGER_DEPLOYMENT: &str = "kruise-controller-manager";
/// The daemon's DaemonSet.
pub const DAEMON_DAEMONSET: &str = "kruise-daemon";

/// Errors reading the embedded manifests (a build of a broken `deploy/`).
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("embedded manifest deploy/{file} is not valid YAML: {message}")]
    Yaml { file: String, message: String },
    #[error("--image-repo {0:?} must not be empty nor end with '/' (example: ghcr.io/me)")]
    BadRepo(String),
}

/// Where the images come from: `REPO/kruise-manager:VERSION`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Images {
    /// Registry and path before the image name; `None`: as `deploy/` says (`kruise-rs`).
    pub repo: Option<String>,
    /// Tag; `None`: as `deploy/` says (`dev`).
    pub version: Option<String>,
}

impl Images {
    /// The image reference replacing `name` (one of [`MANAGER_IMAGE`], [`DAEMON_IMAGE`]).
    pub fn reference(&self, name: &str) -> Result<String, ManifestError> {
        let base = name.rsplit('/').next().unwrap_or(name);
        let repo = match &self.repo {
            Some(r) if r.is_empty() || r.ends_with('/') => {
                return Err(ManifestError::BadRepo(r.clone()));
            }
            Some(r) => r.clone(),
            None => name.rsplit_once('/').map_or("", |(r, _)| r).to_owned(),
        };
        let tag = self.version.as_deref().unwrap_or(DEFAULT_TAG);
        Ok(format!("{repo}/{base}:{tag}"))
    }

    /// The version label to stamp (the tag without a leading `v`).
    pub fn version_label(&self) -> String {
        let tag = self.version.as_deref().unwrap_or(DEFAULT_TAG);
        tag.trim_start_matches('v').to_owned()
    }
}

/// Every object of `deploy/`, in kustomization order, with the images and version label of
/// `images`.
pub fn objects(images: &Images) -> Result<Vec<Value>, ManifestError> {
    let mut out = Vec::new();
    for (file, text) in MANIFESTS {
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(text).map_err(|e| ManifestError::Yaml {
                file: (*file).to_owned(),
                message: e.to_string(),
            })?;
        for mut doc in docs.into_iter().filter(|d| d.is_object()) {
            set_images(&mut doc, images)?;
            out.push(doc);
        }
    }
    Ok(out)
}

/// The CustomResourceDefinitions among `objects`.
pub fn crds(objects: &[Value]) -> Vec<&Value> {
    objects
        .iter()
        .filter(|o| kind(o) == "CustomResourceDefinition")
        .collect()
}

/// `kind` of an object.
pub fn kind(o: &Value) -> &str {
    o["kind"].as_str().unwrap_or_default()
}

/// `metadata.name` of an object.
pub fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

/// Replaces our images in every container of a workload and stamps the version label on it.
fn set_images(doc: &mut Value, images: &Images) -> Result<(), ManifestError> {
    let Some(containers) = doc
        .pointer_mut("/spec/template/spec/containers")
        .and_then(Value::as_array_mut)
    else {
        return Ok(());
    };
    let mut ours = false;
    for c in containers {
        let Some(image) = c["image"].as_str() else {
            continue;
        };
        let name = image.split([':', '@']).next().unwrap_or(image);
        if name == MANAGER_IMAGE || name == DAEMON_IMAGE {
            c["image"] = Value::String(images.reference(name)?);
            ours = true;
        }
    }
    if ours {
        let version = Value::String(images.version_label());
        for path in ["/metadata", "/spec/template/metadata"] {
            if let Some(meta) = doc.pointer_mut(path).and_then(Value::as_object_mut) {
                let labels = meta
                    .entry("labels")
                    .or_insert_with(|| Value::Object(Default::default()));
                if let Some(labels) = labels.as_object_mut() {
                    labels.insert(VERSION_LABEL.to_owned(), version.clone());
                }
            }
        }
    }
    Ok(())
}

/// Writes `text` to stdout; a closed pipe (`| head`) is not an error.
pub fn print_out(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// The objects as one multi-document YAML stream (`install -o yaml`).
pub fn to_yaml(objects: &[Value]) -> Result<String, ManifestError> {
    let mut out = String::new();
    for o in objects {
        let doc = serde_saphyr::to_string(o).map_err(|e| ManifestError::Yaml {
            file: name(o).to_owned(),
            message: e.to_string(),
        })?;
        out.push_str("---\n");
        out.push_str(&doc);
        if !doc.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn images(repo: Option<&str>, version: Option<&str>) -> Images {
        Images {
            repo: repo.map(str::to_owned),
            version: version.map(str::to_owned),
        }
    }

    #[test]
    fn embedded_manifests_are_the_kustomization_resources() {
        let text = include_str!("../../../deploy/kustomization.yaml");
        for (file, _) in MANIFESTS {
            assert!(text.contains(&format!("- {file}")), "{file} not listed");
        }
        let objs = objects(&Images::default()).expect("deploy/ parses");
        let kinds: Vec<&str> = objs.iter().map(kind).collect();
        for k in [
            "Namespace",
            "CustomResourceDefinition",
            "Deployment",
            "DaemonSet",
            "ClusterRole",
        ] {
            assert!(kinds.contains(&k), "no {k} in deploy/: {kinds:?}");
        }
    }

    /// `install` and the chart's defaults ship the gates of `kruise_api::features::SHIPPED_ON`,
    /// to the manager and the daemon alike.
    #[test]
    fn deploy_ships_our_feature_gates() {
        let objs = objects(&Images::default()).expect("deploy/ parses");
        for kind_name in ["Deployment", "DaemonSet"] {
            let o = objs.iter().find(|o| kind(o) == kind_name).expect(kind_name);
            let flags: Vec<&str> = o["spec"]["template"]["spec"]["containers"][0]["args"]
                .as_array()
                .expect("args")
                .iter()
                .filter_map(|a| a.as_str())
                .filter_map(|a| a.strip_prefix(kruise_api::features::FLAG))
                .filter_map(|a| a.strip_prefix('='))
                .collect();
            assert_eq!(flags.len(), 1, "{kind_name}: one --feature-gates");
            let gates = kruise_api::features::FeatureGates::parse(flags[0]).expect("valid gates");
            assert_eq!(gates, kruise_api::features::shipped(), "{kind_name}");
        }
    }

    #[test]
    fn flags_replace_both_images_and_stamp_the_version() {
        let objs = objects(&images(Some("127.0.0.1:5000/me"), Some("v1.2.3"))).expect("parses");
        let manager = objs
            .iter()
            .find(|o| kind(o) == "Deployment" && name(o) == MANAGER_DEPLOYMENT)
            .expect("manager Deployment");
        assert_eq!(
            manager["spec"]["template"]["spec"]["containers"][0]["image"],
            "127.0.0.1:5000/me/kruise-manager:v1.2.3"
        );
        assert_eq!(manager["metadata"]["labels"][VERSION_LABEL], "1.2.3");
        let daemon = objs
            .iter()
            .find(|o| kind(o) == "DaemonSet")
            .expect("daemon DaemonSet");
        assert_eq!(
            daemon["spec"]["template"]["spec"]["containers"][0]["image"],
            "127.0.0.1:5000/me/kruise-daemon:v1.2.3"
        );
    }

    #[test]
    fn defaults_keep_deploys_images() {
        assert_eq!(
            images(None, None).reference(MANAGER_IMAGE).expect("ok"),
            "kruise-rs/kruise-manager:dev"
        );
        assert!(matches!(
            images(Some("reg/"), None).reference(DAEMON_IMAGE),
            Err(ManifestError::BadRepo(_))
        ));
    }

    #[test]
    fn yaml_output_round_trips() {
        let objs = objects(&Images::default()).expect("parses");
        let text = to_yaml(&objs).expect("serialises");
        let back: Vec<Value> = serde_saphyr::from_multiple(&text).expect("reparses");
        assert_eq!(back.len(), objs.len());
        assert_eq!(back, objs);
    }
}
