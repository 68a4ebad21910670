//! Hashes the engine compares with what the daemon reports in runtime-containers-meta: the
//! kubelet's container hash (`plainHash`) and the env-from-metadata hash
//! (`extractedEnvFromMetadataHash`). The env hash is computed by the daemon too, so it lives in
//! [`kruise_api::hash`]; only the engine needs the kubelet's hash, so it stays here.

use k8s_openapi::api::core::v1::Container;
use kruise_api::hash::{deep_hash_json, env_from_metadata, go_json_string};

/// The hash the daemon should report as `extractedEnvFromMetadataHash` once the container runs
/// with the env values taken from these labels and annotations.
pub use kruise_api::hash::expected_hash as env_from_metadata_hash;

/// The kubelet's container hash since Kubernetes 1.31: only name and image are hashed.
pub fn kubelet_container_hash(container: &Container) -> u64 {
    let mut json = String::from("{\"image\":");
    go_json_string(container.image.as_deref().unwrap_or(""), &mut json);
    json.push_str(",\"name\":");
    go_json_string(&container.name, &mut json);
    json.push('}');
    deep_hash_json(&json)
}

/// Whether the container has an env var taking its value from `path` (`metadata.labels` or
/// `metadata.annotations`) at `key`.
pub fn references_metadata(container: &Container, path: &str, key: &str) -> bool {
    env_from_metadata(container)
        .iter()
        .any(|(_, source)| source.path_and_key() == (path, key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inplace::tests::{container, field_env};
    use k8s_openapi::api::core::v1::EnvVar;
    use std::collections::BTreeMap;

    // Reference values printed by the Go code (spew + fnv32a over encoding/json output).
    #[test]
    fn kubelet_hash_matches_go() {
        assert_eq!(
            kubelet_container_hash(&container("main", "nginx:1.25")),
            436018172
        );
        assert_eq!(
            kubelet_container_hash(&container("sidecar", "busybox")),
            287817012
        );
        assert_eq!(
            kubelet_container_hash(&container("a<b>&", "r/x:1")),
            4011799627
        );
    }

    #[test]
    fn env_from_metadata() {
        let c = Container {
            name: "main".into(),
            env: Some(vec![
                field_env("POD_VERSION", "metadata.labels['version']"),
                field_env("SIDECARSET_VERSION", "metadata.annotations['x']"),
                field_env("NAME", "metadata.name"),
                EnvVar {
                    name: "PLAIN".into(),
                    value: Some("v".into()),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        };
        assert!(references_metadata(&c, "metadata.labels", "version"));
        assert!(!references_metadata(&c, "metadata.annotations", "x"));
        assert!(!references_metadata(&c, "metadata.labels", "other"));
        let labels = BTreeMap::from([("version".to_string(), "v2".to_string())]);
        // Go's value for `[{"name":"POD_VERSION","value":"v2"}]`.
        assert_eq!(
            env_from_metadata_hash(&c, &labels, &BTreeMap::new()),
            4071200530
        );
    }
}
