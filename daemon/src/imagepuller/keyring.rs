//! Registry credentials from image pull secrets (`kubernetes.io/dockerconfigjson` and
//! `kubernetes.io/dockercfg`), matched against an image the way the kubelet's keyring does:
//! same registry host (a leading `*.` matches one label), repository path prefix, most
//! specific entry first.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kruise_api::image::{DOCKER_HUB, ImageReference};
use serde::Deserialize;

use crate::criruntime::Auth;

#[derive(Deserialize, Default)]
struct DockerConfigJson {
    #[serde(default)]
    auths: BTreeMap<String, DockerConfigEntry>,
}

#[derive(Deserialize, Default, Clone)]
struct DockerConfigEntry {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    auth: String,
}

impl DockerConfigEntry {
    fn credentials(&self) -> Option<Auth> {
        if !self.username.is_empty() || !self.password.is_empty() {
            return Some(Auth {
                username: self.username.clone(),
                password: self.password.clone(),
            });
        }
        // `auth` is base64("user:password").
        let raw = base64::engine::general_purpose::STANDARD
            .decode(self.auth.trim())
            .ok()?;
        let s = String::from_utf8(raw).ok()?;
        let (u, p) = s.split_once(':')?;
        Some(Auth {
            username: u.to_string(),
            password: p.to_string(),
        })
    }
}

/// (registry key as written in the secret, credentials).
pub type Entry = (String, Auth);

/// Every credential in the secrets, in secret order.
pub fn entries_from_secrets(secrets: &[Secret]) -> Vec<Entry> {
    let mut out = Vec::new();
    for s in secrets {
        let data = s.data.clone().unwrap_or_default();
        let map: BTreeMap<String, DockerConfigEntry> =
            if let Some(b) = data.get(".dockerconfigjson") {
                serde_json::from_slice::<DockerConfigJson>(&b.0)
                    .map(|c| c.auths)
                    .unwrap_or_default()
            } else if let Some(b) = data.get(".dockercfg") {
                serde_json::from_slice(&b.0).unwrap_or_default()
            } else {
                BTreeMap::new()
            };
        for (k, v) in map {
            if let Some(a) = v.credentials() {
                out.push((k, a));
            }
        }
    }
    out
}

/// Splits an image name (no tag) into (registry host, repository path), applying Docker's
/// defaults: no host means Docker Hub, and a single-segment Hub path gets `library/`.
pub fn split_image(image: &str) -> (String, String) {
    let r = ImageReference::split(image);
    let host = normalize_host(r.domain());
    if host != r.domain() {
        // Another name of Docker Hub: its paths read as the Hub's.
        return split_image(&format!("{host}/{}", r.path()));
    }
    (host, r.path().to_owned())
}

fn normalize_host(h: &str) -> String {
    match h {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => DOCKER_HUB.into(),
        other => other.to_string(),
    }
}

/// Splits a keyring key (`https://host/path/`, `host`, `host/path`) into (host, path).
fn split_key(key: &str) -> (String, String) {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let (host, path) = k.split_once('/').unwrap_or((k, ""));
    let host = normalize_host(host);
    // `https://index.docker.io/v1/` is the Hub itself, not a repository called v1.
    let path = if host == DOCKER_HUB && path.trim_end_matches('/') == "v1" {
        ""
    } else {
        path.trim_end_matches('/')
    };
    (host, path.to_string())
}

fn host_matches(pattern: &str, host: &str) -> bool {
    if pattern == host {
        return true;
    }
    // Compare ports separately so `*.example.com` does not swallow `a.example.com:5000`.
    let (pat_name, pat_port) = pattern.split_once(':').unwrap_or((pattern, ""));
    let (name, port) = host.split_once(':').unwrap_or((host, ""));
    if pat_port != port {
        return false;
    }
    match pat_name.strip_prefix("*.") {
        Some(suffix) => name
            .split_once('.')
            .is_some_and(|(_, host_suffix)| host_suffix == suffix),
        None => pat_name == name,
    }
}

/// Credentials that apply to `image` (without tag), most specific key first.
pub fn lookup(entries: &[Entry], image: &str) -> Vec<Auth> {
    let (host, path) = split_image(image);
    let mut hits: Vec<(usize, &Auth)> = entries
        .iter()
        .filter_map(|(key, auth)| {
            let (kh, kp) = split_key(key);
            let path_ok = kp.is_empty()
                || path == kp
                || path.strip_prefix(&kp).is_some_and(|r| r.starts_with('/'));
            (host_matches(&kh, &host) && path_ok).then_some((kh.len() + kp.len(), auth))
        })
        .collect();
    // Stable: equally specific keys keep secret order.
    hits.sort_by_key(|h| std::cmp::Reverse(h.0));
    let mut out: Vec<Auth> = Vec::new();
    for (_, a) in hits {
        if !out.contains(a) {
            out.push(a.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(key: &str, json: &str) -> Secret {
        Secret {
            data: Some(BTreeMap::from([(
                key.to_string(),
                ByteString(json.as_bytes().to_vec()),
            )])),
            ..Default::default()
        }
    }

    fn auth(u: &str) -> Auth {
        Auth {
            username: u.into(),
            password: "p".into(),
        }
    }

    #[test]
    fn image_names_get_docker_defaults() {
        assert_eq!(
            split_image("nginx"),
            ("docker.io".into(), "library/nginx".into())
        );
        assert_eq!(split_image("me/app"), ("docker.io".into(), "me/app".into()));
        assert_eq!(
            split_image("127.0.0.1:5000/test/app"),
            ("127.0.0.1:5000".into(), "test/app".into())
        );
        assert_eq!(
            split_image("localhost/app"),
            ("localhost".into(), "app".into())
        );
        assert_eq!(
            split_image("index.docker.io/library/busybox"),
            ("docker.io".into(), "library/busybox".into())
        );
    }

    #[test]
    fn parses_both_secret_formats_and_auth_field() {
        let b64 = base64::engine::general_purpose::STANDARD.encode("bob:pw");
        let s1 = secret(
            ".dockerconfigjson",
            &format!(r#"{{"auths":{{"reg.io":{{"auth":"{b64}"}}}}}}"#),
        );
        let s2 = secret(
            ".dockercfg",
            r#"{"old.io":{"username":"al","password":"x"}}"#,
        );
        let s3 = secret("other", "{}");
        let e = entries_from_secrets(&[s1, s2, s3]);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].0, "reg.io");
        assert_eq!(e[0].1.username, "bob");
        assert_eq!(e[0].1.password, "pw");
        assert_eq!(e[1].1.username, "al");
    }

    #[test]
    fn lookup_matches_host_path_and_orders_by_specificity() {
        let entries = vec![
            ("reg.io".to_string(), auth("host")),
            ("https://reg.io/team/".to_string(), auth("team")),
            ("other.io".to_string(), auth("other")),
            ("*.wild.io".to_string(), auth("wild")),
            ("https://index.docker.io/v1/".to_string(), auth("hub")),
        ];
        let names = |img: &str| -> Vec<String> {
            lookup(&entries, img)
                .into_iter()
                .map(|a| a.username)
                .collect()
        };
        assert_eq!(names("reg.io/team/app"), vec!["team", "host"]);
        assert_eq!(names("reg.io/teamx/app"), vec!["host"]);
        assert_eq!(names("a.wild.io/x"), vec!["wild"]);
        assert!(names("a.b.wild.io/x").is_empty());
        assert_eq!(names("busybox"), vec!["hub"]);
        assert!(names("127.0.0.1:5000/app").is_empty());
    }

    #[test]
    fn debug_never_prints_passwords() {
        let a = Auth {
            username: "u".into(),
            password: "secret-pw".into(),
        };
        assert!(!format!("{a:?}").contains("secret-pw"));
    }
}
