//! Hashes that must equal the ones computed by Go code we interoperate with: the kubelet's
//! container hash (reported by the daemon as `plainHash`) and the env-from-metadata hash
//! (`extractedEnvFromMetadataHash`). Both are FNV-32a over `spew`'s `%#v` rendering of the
//! Go-encoded JSON bytes, so both the JSON encoding and the rendering are reproduced here.

use k8s_openapi::api::core::v1::Container;
use kruise_api::keys;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Env vars the daemon leaves out of the env hash (SidecarSet bookkeeping).
const EXCLUDED_ENVS: [&str; 2] = [
    keys::ENV_SIDECARSET_VERSION,
    keys::ENV_SIDECARSET_VERSION_ALT,
];

fn fnv32a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// What `spew` (as configured by Kubernetes' `DeepHashObject`) prints for a `[]byte`.
fn spew_bytes(bytes: Option<&[u8]>) -> String {
    let Some(bytes) = bytes else {
        return "([]uint8)<nil>".to_string();
    };
    let mut out = String::with_capacity(bytes.len() * 4 + 10);
    out.push_str("([]uint8)[");
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let _ = write!(out, "{b}");
    }
    out.push(']');
    out
}

fn deep_hash_json(json: &str) -> u64 {
    u64::from(fnv32a(spew_bytes(Some(json.as_bytes())).as_bytes()))
}

/// A JSON string literal as Go's `encoding/json` writes it (HTML-safe escaping).
fn go_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The kubelet's container hash since Kubernetes 1.31: only name and image are hashed.
pub fn kubelet_container_hash(container: &Container) -> u64 {
    let mut json = String::from("{\"image\":");
    go_json_string(&mut json, container.image.as_deref().unwrap_or(""));
    json.push_str(",\"name\":");
    go_json_string(&mut json, &container.name);
    json.push('}');
    deep_hash_json(&json)
}

/// Splits `metadata.labels['key']` into (`metadata.labels`, `key`).
pub(crate) fn split_subscripted_path(field_path: &str) -> Option<(&str, &str)> {
    let inner = field_path.strip_suffix("']")?;
    let (path, key) = inner.split_once("['")?;
    (!path.is_empty()).then_some((path, key))
}

/// The env vars of a container whose value comes from a pod label or annotation, as
/// (env name, `metadata.labels` | `metadata.annotations`, key).
pub(crate) fn env_from_metadata_refs(container: &Container) -> Vec<(&str, &str, &str)> {
    let mut refs = Vec::new();
    for env in container.env.iter().flatten() {
        if env.value.as_deref().is_some_and(|v| !v.is_empty())
            || EXCLUDED_ENVS.contains(&env.name.as_str())
        {
            continue;
        }
        let Some(field_ref) = env.value_from.as_ref().and_then(|v| v.field_ref.as_ref()) else {
            continue;
        };
        if let Some((path, key)) = split_subscripted_path(&field_ref.field_path)
            && (path == "metadata.labels" || path == "metadata.annotations")
        {
            refs.push((env.name.as_str(), path, key));
        }
    }
    refs
}

/// Whether the container has an env var taking its value from `path` (`metadata.labels` or
/// `metadata.annotations`) at `key`.
pub fn references_metadata(container: &Container, path: &str, key: &str) -> bool {
    env_from_metadata_refs(container)
        .iter()
        .any(|(_, p, k)| *p == path && *k == key)
}

/// The hash the daemon should report as `extractedEnvFromMetadataHash` once the container runs
/// with the env values taken from these labels and annotations.
pub fn env_from_metadata_hash(
    container: &Container,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> u64 {
    let mut envs: Vec<(&str, &str)> = env_from_metadata_refs(container)
        .into_iter()
        .map(|(name, path, key)| {
            let source = if path == "metadata.labels" {
                labels
            } else {
                annotations
            };
            (name, source.get(key).map(String::as_str).unwrap_or(""))
        })
        .collect();
    // Stable, by name, like the Go side.
    envs.sort_by(|a, b| a.0.cmp(b.0));
    deep_hash_json(&env_list_json(&envs))
}

/// Go's JSON for a `[]EnvVar` holding only names and values; `null` when empty (a nil slice).
fn env_list_json(envs: &[(&str, &str)]) -> String {
    if envs.is_empty() {
        return "null".to_string();
    }
    let mut json = String::from("[");
    for (i, (name, value)) in envs.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json.push_str("{\"name\":");
        go_json_string(&mut json, name);
        if !value.is_empty() {
            json.push_str(",\"value\":");
            go_json_string(&mut json, value);
        }
        json.push('}');
    }
    json.push(']');
    json
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector};

    // Reference values printed by the Go code (spew + fnv32a over encoding/json output).
    #[test]
    fn kubelet_hash_matches_go() {
        let c = |name: &str, image: &str| Container {
            name: name.into(),
            image: Some(image.into()),
            ..Default::default()
        };
        assert_eq!(kubelet_container_hash(&c("main", "nginx:1.25")), 436018172);
        assert_eq!(kubelet_container_hash(&c("sidecar", "busybox")), 287817012);
        assert_eq!(kubelet_container_hash(&c("a<b>&", "r/x:1")), 4011799627);
    }

    #[test]
    fn env_list_hash_matches_go() {
        assert_eq!(deep_hash_json(&env_list_json(&[])), 86995377);
        assert_eq!(
            deep_hash_json(&env_list_json(&[("A", "x"), ("B", "")])),
            297544401
        );
        assert_eq!(
            deep_hash_json(&env_list_json(&[("POD_VERSION", "v2")])),
            4071200530
        );
        assert_eq!(spew_bytes(None), "([]uint8)<nil>");
        assert_eq!(spew_bytes(Some(&[])), "([]uint8)[]");
    }

    fn field_env(name: &str, path: &str) -> EnvVar {
        EnvVar {
            name: name.into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: path.into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
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
        assert_eq!(
            env_from_metadata_hash(&c, &labels, &BTreeMap::new()),
            4071200530
        );
    }

    #[test]
    fn subscripted_paths() {
        assert_eq!(
            split_subscripted_path("metadata.labels['a.b/c']"),
            Some(("metadata.labels", "a.b/c"))
        );
        assert_eq!(split_subscripted_path("metadata.name"), None);
        assert_eq!(split_subscripted_path("['x']"), None);
    }
}
