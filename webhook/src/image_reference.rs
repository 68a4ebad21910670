//! Image references as a person writes them (`[registry/]repo[:tag][@digest]`), checked by the
//! pull kinds' validation against the whole reference grammar ([`kruise_api::image`]).

use kruise_api::image::{ImageReference, Syntax};

/// Why `image` is not a pullable reference (`[registry/]repo[:tag][@digest]`), if it is not.
pub fn image_reference_problem(image: &str) -> Option<String> {
    ImageReference::parse(image, Syntax::Strict)
        .err()
        .map(|e| format!("invalid reference format: {e}"))
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
