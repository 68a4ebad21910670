//! Image references as NodeImage keys them: the short ("familiar") repository name and the tag
//! (or digest), as upstream's `NormalizeImageRefToNameTag` gives them.

use kruise_api::image::{ImageReference, ImageReferenceError, Syntax};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("invalid image reference {0:?}: {1}")]
    Invalid(String, ImageReferenceError),
}

/// Splits `image` into (name, tag): `nginx` → (`nginx`, `latest`),
/// `docker.io/library/nginx:1` → (`nginx`, `1`), `reg:5000/a/b@sha256:…` → (`reg:5000/a/b`,
/// `sha256:…`). A digest wins over a tag, as in upstream. The job was admitted already, so
/// only the loose syntax is checked.
pub fn name_and_tag(image: &str) -> Result<(String, String), ImageError> {
    let r = ImageReference::parse(image.trim(), Syntax::Loose)
        .map_err(|e| ImageError::Invalid(image.to_string(), e))?;
    Ok((r.familiar_name(), r.tag_or_digest().to_owned()))
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
