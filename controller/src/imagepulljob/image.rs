//! Image references as NodeImage keys them: the short ("familiar") repository name and the tag
//! (or digest), as upstream's `NormalizeImageRefToNameTag` gives them.

const DEFAULT_DOMAIN: &str = "docker.io";
const LEGACY_DOMAIN: &str = "index.docker.io";
const OFFICIAL_PREFIX: &str = "library/";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("invalid image reference {0:?}: {1}")]
    Invalid(String, &'static str),
}

/// Splits `image` into (name, tag): `nginx` → (`nginx`, `latest`),
/// `docker.io/library/nginx:1` → (`nginx`, `1`), `reg:5000/a/b@sha256:…` → (`reg:5000/a/b`,
/// `sha256:…`). A digest wins over a tag, as in upstream.
pub fn name_and_tag(image: &str) -> Result<(String, String), ImageError> {
    let bad = |why| ImageError::Invalid(image.to_string(), why);
    let image = image.trim();
    if image.is_empty() {
        return Err(bad("empty"));
    }
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => {
            if !d.contains(':') {
                return Err(bad("digest must be algorithm:hex"));
            }
            (r, Some(d))
        }
        None => (image, None),
    };
    // A ':' after the last '/' separates the tag; one before it belongs to a registry port.
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (repo, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if repo.is_empty() || tag.is_some_and(str::is_empty) {
        return Err(bad("empty name or tag"));
    }
    let (domain, path) = match repo.split_once('/') {
        Some((d, p)) if d.contains('.') || d.contains(':') || d == "localhost" => (d, p),
        _ => (DEFAULT_DOMAIN, repo),
    };
    if path.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(bad("repository name must be lowercase"));
    }
    let name = if domain == DEFAULT_DOMAIN || domain == LEGACY_DOMAIN {
        match path.strip_prefix(OFFICIAL_PREFIX) {
            Some(short) if !short.contains('/') => short.to_string(),
            _ => path.to_string(),
        }
    } else {
        format!("{domain}/{path}")
    };
    let tag = match (digest, tag) {
        (Some(d), _) => d.to_string(),
        (None, Some(t)) => t.to_string(),
        (None, None) => "latest".to_string(),
    };
    Ok((name, tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn familiar_names_and_tags() {
        let cases = [
            ("nginx", "nginx", "latest"),
            ("nginx:1.25", "nginx", "1.25"),
            ("docker.io/library/nginx:1", "nginx", "1"),
            ("index.docker.io/library/nginx", "nginx", "latest"),
            ("docker.io/foo/bar:2", "foo/bar", "2"),
            ("library/busybox", "busybox", "latest"),
            (
                "127.0.0.1:5000/kruise/app:v2",
                "127.0.0.1:5000/kruise/app",
                "v2",
            ),
            ("localhost/app", "localhost/app", "latest"),
            (
                "registry.k8s.io/pause:3.10",
                "registry.k8s.io/pause",
                "3.10",
            ),
            ("reg:5000/a@sha256:abc", "reg:5000/a", "sha256:abc"),
            ("reg/a:1@sha256:abc", "reg/a", "sha256:abc"),
        ];
        for (img, name, tag) in cases {
            assert_eq!(
                name_and_tag(img),
                Ok((name.to_string(), tag.to_string())),
                "{img}"
            );
        }
    }

    #[test]
    fn invalid_references() {
        for img in ["", "Nginx", "nginx:", "a@nodigest", ":tag"] {
            assert!(name_and_tag(img).is_err(), "{img}");
        }
    }
}
