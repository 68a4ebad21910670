//! Hashes that must equal the ones Go code computes, shared by the manager and the daemon.
//!
//! The env-from-metadata hash (`extractedEnvFromMetadataHash` in
//! `apps.kruise.io/runtime-containers-meta`) covers the env vars a container takes from its pod's
//! labels/annotations (`fieldRef` `metadata.labels['k']` / `metadata.annotations['k']`). The
//! daemon hashes what the running process really has, the manager's in-place engine what the
//! pod's current metadata says, and the two are compared, so both sides use this one module and
//! both must be byte-for-byte what upstream computes: FNV-32a over the go-spew `%#v` dump of the
//! Go-JSON encoding of `[]EnvVar{name, value}` sorted by name.
//!
//! [`go_json_string`] and [`deep_hash_json`] are the building blocks, public so that other
//! Go-compatible hashes (the kubelet's container hash) are built the same way.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Container;

use crate::keys;

/// Env vars upstream leaves out: SidecarSet hot-upgrade bookkeeping, changed without restarts.
const EXCLUDED_ENVS: [&str; 2] = [
    keys::ENV_SIDECARSET_VERSION,
    keys::ENV_SIDECARSET_VERSION_ALT,
];

const LABELS_PATH: &str = "metadata.labels";
const ANNOTATIONS_PATH: &str = "metadata.annotations";

/// Splits `metadata.labels['k']` into (`metadata.labels`, `k`), like k8s fieldpath.
pub fn split_subscripted_path(path: &str) -> Option<(&str, &str)> {
    let inner = path.strip_suffix("']")?;
    let (head, key) = inner.split_once("['")?;
    if head.is_empty() {
        None
    } else {
        Some((head, key))
    }
}

/// Which metadata map an env var reads, and under which key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaSource<'a> {
    Label(&'a str),
    Annotation(&'a str),
}

impl<'a> MetaSource<'a> {
    /// The field path (`metadata.labels` or `metadata.annotations`) and the key, as written in
    /// the `fieldRef`.
    pub fn path_and_key(self) -> (&'static str, &'a str) {
        match self {
            MetaSource::Label(k) => (LABELS_PATH, k),
            MetaSource::Annotation(k) => (ANNOTATIONS_PATH, k),
        }
    }
}

/// The env vars of `c` that come from pod metadata, in spec order: (env name, source).
pub fn env_from_metadata(c: &Container) -> Vec<(&str, MetaSource<'_>)> {
    let mut out = Vec::new();
    for e in c.env.iter().flatten() {
        if e.value.as_deref().is_some_and(|v| !v.is_empty()) {
            continue;
        }
        let Some(field_ref) = e.value_from.as_ref().and_then(|v| v.field_ref.as_ref()) else {
            continue;
        };
        if EXCLUDED_ENVS.contains(&e.name.as_str()) {
            continue;
        }
        match split_subscripted_path(&field_ref.field_path) {
            Some((LABELS_PATH, k)) => out.push((e.name.as_str(), MetaSource::Label(k))),
            Some((ANNOTATIONS_PATH, k)) => out.push((e.name.as_str(), MetaSource::Annotation(k))),
            _ => {}
        }
    }
    out
}

/// Whether the container has any env var taken from pod metadata (reading its env is needed).
pub fn references_metadata(c: &Container) -> bool {
    !env_from_metadata(c).is_empty()
}

/// Hash the container should have given the pod's current labels and annotations.
pub fn expected_hash(
    c: &Container,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> u64 {
    let envs = env_from_metadata(c)
        .into_iter()
        .map(|(name, src)| {
            let v = match src {
                MetaSource::Label(k) => labels.get(k),
                MetaSource::Annotation(k) => annotations.get(k),
            };
            (name.to_string(), v.cloned().unwrap_or_default())
        })
        .collect();
    hash_envs(envs)
}

/// Hash of what the running container really has; `actual` is its environment by name.
pub fn current_hash(c: &Container, actual: &BTreeMap<String, String>) -> u64 {
    let envs = env_from_metadata(c)
        .into_iter()
        .map(|(name, _)| {
            (
                name.to_string(),
                actual.get(name).cloned().unwrap_or_default(),
            )
        })
        .collect();
    hash_envs(envs)
}

fn hash_envs(mut envs: Vec<(String, String)>) -> u64 {
    // Stable sort by name, as upstream does.
    envs.sort_by(|a, b| a.0.cmp(&b.0));
    deep_hash_json(&go_json_env_list(&envs))
}

/// Go `json.Marshal([]v1.EnvVar)` for name/value pairs: nil slice is `null`, empty value omitted.
fn go_json_env_list(envs: &[(String, String)]) -> String {
    if envs.is_empty() {
        return "null".to_string();
    }
    let mut s = String::from("[");
    for (i, (name, value)) in envs.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str("{\"name\":");
        go_json_string(name, &mut s);
        if !value.is_empty() {
            s.push_str(",\"value\":");
            go_json_string(value, &mut s);
        }
        s.push('}');
    }
    s.push(']');
    s
}

/// Appends `v` as a JSON string literal the way Go's encoding/json writes it, which (unlike
/// serde_json) HTML-escapes `<>&` and escapes U+2028/U+2029.
pub fn go_json_string(v: &str, out: &mut String) {
    out.push('"');
    for ch in v.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", ch as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Kubernetes' `DeepHashObject` of a `[]byte` holding `json` (the Go-encoded JSON of the
/// hashed value): FNV-32a of its go-spew dump, widened to u64 as upstream stores it.
pub fn deep_hash_json(json: &str) -> u64 {
    u64::from(fnv32a(spew_bytes(json.as_bytes()).as_bytes()))
}

/// go-spew `%#v` of a `[]byte`: the type then the decimal bytes.
fn spew_bytes(b: &[u8]) -> String {
    let body: Vec<String> = b.iter().map(|x| x.to_string()).collect();
    format!("([]uint8)[{}]", body.join(" "))
}

fn fnv32a(data: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in data {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector};

    fn from_meta(name: &str, path: &str) -> EnvVar {
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

    fn plain(name: &str, v: &str) -> EnvVar {
        EnvVar {
            name: name.into(),
            value: Some(v.into()),
            ..Default::default()
        }
    }

    fn container(env: Vec<EnvVar>) -> Container {
        Container {
            name: "c".into(),
            env: Some(env),
            ..Default::default()
        }
    }

    // Golden values computed with upstream's Go code (k8s.io/apimachinery dump.ForHash + fnv32a).
    #[test]
    fn matches_upstream_golden_values() {
        assert_eq!(hash_envs(vec![]), 86_995_377);
        assert_eq!(hash_envs(vec![("e2".into(), "foo".into())]), 2_053_173_458);
        assert_eq!(
            hash_envs(vec![("B".into(), "".into()), ("A".into(), "x".into())]),
            297_544_401
        );
        assert_eq!(
            hash_envs(vec![("E".into(), "a\"b<>&é".into())]),
            552_814_345
        );
        // Control characters, U+2028 and backslash escape exactly as Go's encoder does.
        assert_eq!(
            hash_envs(vec![(
                "N".into(),
                "line1\nline2\ttab\u{2028}\u{1}\\".into()
            )]),
            3_433_038_956
        );
        // Sorted by name before encoding; \b and \f use Go >= 1.22's short escapes.
        assert_eq!(
            hash_envs(vec![
                ("Z".into(), "日本".into()),
                ("A".into(), "b\u{8}f\u{c}".into())
            ]),
            2_251_390_145
        );
        assert_eq!(spew_bytes(&[]), "([]uint8)[]");
    }

    #[test]
    fn subscripted_paths() {
        assert_eq!(
            split_subscripted_path("metadata.labels['app']"),
            Some(("metadata.labels", "app"))
        );
        assert_eq!(
            split_subscripted_path("metadata.labels['a.b/c']"),
            Some(("metadata.labels", "a.b/c"))
        );
        assert_eq!(split_subscripted_path("metadata.name"), None);
        assert_eq!(split_subscripted_path("['x']"), None);
    }

    #[test]
    fn expected_equals_current_when_process_saw_the_same_values() {
        let c = container(vec![
            plain("e1", "a"),
            from_meta("e2", "metadata.labels['l1']"),
            from_meta("e3", "metadata.annotations['a1']"),
            from_meta("e4", "metadata.name"),
            from_meta("SIDECARSET_VERSION", "metadata.annotations['v']"),
        ]);
        let labels = BTreeMap::from([("l1".to_string(), "foo".to_string())]);
        let annotations = BTreeMap::from([("a1".to_string(), "bar".to_string())]);
        let expect = expected_hash(&c, &labels, &annotations);
        let env = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let actual = env(&[
            ("PATH", "/bin"),
            ("e2", "foo"),
            ("e3", "bar"),
            ("e1", "a"),
            ("HOSTNAME", "x"),
        ]);
        assert_eq!(expect, current_hash(&c, &actual));
        let stale = env(&[("e2", "old"), ("e3", "bar")]);
        assert_ne!(expect, current_hash(&c, &stale));
        // Same as the golden two-entry list: only e2, e3 count.
        assert_eq!(
            expect,
            hash_envs(vec![
                ("e2".into(), "foo".into()),
                ("e3".into(), "bar".into())
            ])
        );
    }

    #[test]
    fn spec_order_does_not_matter() {
        let a = container(vec![
            plain("e1", "a"),
            from_meta("e2", "metadata.labels['l1']"),
        ]);
        let b = container(vec![
            from_meta("e2", "metadata.labels['l1']"),
            plain("e1", "a"),
        ]);
        let labels = BTreeMap::from([("l1".to_string(), "foo".to_string())]);
        let none = BTreeMap::new();
        assert_eq!(
            expected_hash(&a, &labels, &none),
            expected_hash(&b, &labels, &none)
        );
        assert!(references_metadata(&a));
        assert!(!references_metadata(&container(vec![plain("x", "y")])));
    }

    #[test]
    fn sources_name_their_field_path() {
        let c = container(vec![
            from_meta("L", "metadata.labels['l']"),
            from_meta("A", "metadata.annotations['a']"),
            from_meta("SIDECARSET_VERSION_ALT", "metadata.labels['v']"),
        ]);
        let found: Vec<_> = env_from_metadata(&c)
            .into_iter()
            .map(|(name, src)| (name, src.path_and_key()))
            .collect();
        assert_eq!(
            found,
            vec![
                ("L", ("metadata.labels", "l")),
                ("A", ("metadata.annotations", "a")),
            ]
        );
    }
}
