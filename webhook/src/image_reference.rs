//! Image references as a person writes them (`[registry/]repo[:tag][@digest]`), checked by the
//! pull kinds' validation. Not a wire format of `kruise-api`; the daemon has the full parser
//! it pulls with.

/// Why `image` is not a pullable reference (`[registry/]repo[:tag][@digest]`), if it is not.
/// Looser than the daemon's full parser; catches what a person would mistype.
pub fn image_reference_problem(image: &str) -> Option<&'static str> {
    if image.chars().any(char::is_whitespace) {
        return Some("invalid reference format: must not contain whitespace");
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let valid = d.split_once(':').is_some_and(|(alg, hex)| {
            !alg.is_empty() && hex.len() >= 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())
        });
        if !valid {
            return Some("invalid reference format: bad digest");
        }
    }
    // A ':' after the last '/' starts the tag; before it, it is a registry port.
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let (repo, tag) = match name[last_slash..].rfind(':') {
        Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
        None => (name, None),
    };
    if let Some(t) = tag {
        let ok = !t.is_empty()
            && t.len() <= 128
            && t.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if !ok {
            return Some("invalid reference format: bad tag");
        }
    }
    if repo.is_empty() || repo.split('/').any(str::is_empty) {
        return Some("invalid reference format: empty path component");
    }
    // The first component may be a registry host (with dots, a port, capitals); the rest is
    // repository path, which must be lowercase.
    let mut parts: Vec<&str> = repo.split('/').collect();
    let first_is_host = parts.len() > 1
        && (parts[0].contains('.') || parts[0].contains(':') || parts[0] == "localhost");
    if first_is_host {
        parts.remove(0);
    }
    let path_ok = parts.iter().all(|p| {
        p.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        }) && p.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
    });
    if !path_ok {
        return Some("invalid reference format: repository name must be lowercase");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references() {
        for good in [
            "nginx",
            "nginx:1.25",
            "library/nginx:latest",
            "registry.example.com:5000/team/app:v1-rc.2",
            "localhost/app",
            "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(image_reference_problem(good), None, "{good}");
        }
        for bad in ["a b", "/nginx", "nginx//x", "Team/app", "app:-x", "app@md5"] {
            assert!(image_reference_problem(bad).is_some(), "{bad}");
        }
    }
}
