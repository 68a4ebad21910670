use proptest::prelude::*;

use super::*;

const HEX64: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn parts(r: &ImageReference) -> (&str, &str, Option<&str>, Option<&str>) {
    (r.domain(), r.path(), r.tag(), r.digest())
}

#[test]
fn docker_defaults_and_parts() {
    let digest = format!("sha256:{HEX64}");
    let with_digest = format!("ghcr.io/a/b:1@{digest}");
    let cases = [
        ("nginx", ("docker.io", "library/nginx", None, None)),
        (
            "nginx:1.25",
            ("docker.io", "library/nginx", Some("1.25"), None),
        ),
        ("me/app", ("docker.io", "me/app", None, None)),
        (
            "docker.io/nginx",
            ("docker.io", "library/nginx", None, None),
        ),
        (
            "index.docker.io/library/busybox",
            ("docker.io", "library/busybox", None, None),
        ),
        ("localhost/app", ("localhost", "app", None, None)),
        (
            "127.0.0.1:5000/test/app:v2",
            ("127.0.0.1:5000", "test/app", Some("v2"), None),
        ),
        (
            "registry.k8s.io/pause:3.10",
            ("registry.k8s.io", "pause", Some("3.10"), None),
        ),
        (
            with_digest.as_str(),
            ("ghcr.io", "a/b", Some("1"), Some(digest.as_str())),
        ),
    ];
    for (image, want) in cases {
        let r = ImageReference::parse(image, Syntax::Strict).expect(image);
        assert_eq!(parts(&r), want, "{image}");
        assert_eq!(ImageReference::split(image), r, "{image}");
    }
}

/// `image → familiar name @ tag-or-digest = full form`, one line per case.
#[test]
fn familiar_names_full_names_and_tags() {
    let cases = [
        "nginx → nginx @ latest = docker.io/library/nginx:latest",
        "docker.io/library/nginx:1 → nginx @ 1 = docker.io/library/nginx:1",
        "docker.io/foo/bar:2 → foo/bar @ 2 = docker.io/foo/bar:2",
        "library/a/b → library/a/b @ latest = docker.io/library/a/b:latest",
        "localhost/x:2 → localhost/x @ 2 = localhost/x:2",
        "reg:5000/a@sha256:abc → reg:5000/a @ sha256:abc = reg:5000/a@sha256:abc",
        "reg/a:1@sha256:abc → reg/a @ sha256:abc = docker.io/reg/a:1@sha256:abc",
    ];
    for case in cases {
        let (image, rest) = case.split_once(" → ").expect("case");
        let (familiar, rest) = rest.split_once(" @ ").expect("case");
        let (tag, full) = rest.split_once(" = ").expect("case");
        let r = ImageReference::parse(image, Syntax::Loose).expect(image);
        assert_eq!(r.familiar_name(), familiar, "{image}");
        assert_eq!(r.tag_or_digest(), tag, "{image}");
        assert_eq!(r.to_string(), full, "{image}");
    }
}

/// Each problem by name, under both syntaxes (`None`: the loose syntax lets it through, as
/// it was admitted already).
#[test]
fn each_problem_is_named() {
    use ImageReferenceError::*;
    let cases = [
        ("", Empty, Some(Empty)),
        ("a b", Whitespace, None),
        ("nginx@sha256:12", BadDigest, None),
        ("a@nodigest", BadDigest, Some(BadDigest)),
        ("nginx:", BadTag, Some(BadTag)),
        ("app:-x", BadTag, None),
        (":tag", EmptyPathComponent, Some(EmptyPathComponent)),
        ("/nginx", EmptyPathComponent, None),
        ("nginx//x", EmptyPathComponent, None),
        ("Nginx:1", NotLowercase, Some(NotLowercase)),
        ("Team/app", NotLowercase, Some(NotLowercase)),
        (
            "127.0.0.1:5000/Kruise-RS/testapp:v1",
            NotLowercase,
            Some(NotLowercase),
        ),
    ];
    for (image, strict, loose) in cases {
        assert_eq!(
            ImageReference::parse(image, Syntax::Strict),
            Err(strict),
            "{image}"
        );
        let got = ImageReference::parse(image, Syntax::Loose);
        assert_eq!(got.err(), loose, "{image}");
    }
    assert_eq!(
        ImageReferenceError::NotLowercase.to_string(),
        "repository name must be lowercase"
    );
}

fn arb_component() -> impl Strategy<Value = String> {
    "[a-z0-9]{1,6}([_-][a-z0-9]{1,4})?"
}

fn arb_reference()
-> impl Strategy<Value = (Option<String>, Vec<String>, Option<String>, Option<String>)> {
    (
        prop_oneof![
            Just(None),
            Just(Some("docker.io".to_owned())),
            Just(Some("localhost".to_owned())),
            "[a-z]{1,5}\\.[a-z]{2,3}(:[0-9]{2,5})?".prop_map(Some),
        ],
        proptest::collection::vec(arb_component(), 1..4),
        proptest::option::of("[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}"),
        proptest::option::of("[a-f0-9]{32,64}".prop_map(|h| format!("sha256:{h}"))),
    )
}

fn write(
    domain: &Option<String>,
    path: &[String],
    tag: &Option<String>,
    digest: &Option<String>,
) -> String {
    let mut s = domain.as_ref().map(|d| format!("{d}/")).unwrap_or_default();
    s.push_str(&path.join("/"));
    if let Some(t) = tag {
        s.push(':');
        s.push_str(t);
    }
    if let Some(d) = digest {
        s.push('@');
        s.push_str(d);
    }
    s
}

proptest! {
    /// Whatever is written, `split` gives parts, and a reference that parses is what `split`
    /// gives.
    #[test]
    fn split_never_fails_and_agrees_with_parse(image in ".{0,40}") {
        let split = ImageReference::split(&image);
        for syntax in [Syntax::Strict, Syntax::Loose] {
            if let Ok(r) = ImageReference::parse(&image, syntax) {
                prop_assert_eq!(&r, &split);
            }
        }
        if ImageReference::parse(&image, Syntax::Strict).is_ok() {
            prop_assert!(ImageReference::parse(&image, Syntax::Loose).is_ok());
        }
    }

    /// A well-formed reference parses strictly into the parts it was written with, and its
    /// full form and familiar name parse back to the same repository.
    #[test]
    fn written_parts_come_back((domain, path, tag, digest) in arb_reference()) {
        let image = write(&domain, &path, &tag, &digest);
        let r = ImageReference::parse(&image, Syntax::Strict)
            .map_err(|e| TestCaseError::fail(format!("{image}: {e}")))?;
        let joined = path.join("/");
        let want_path = if r.domain() == DOCKER_HUB && path.len() == 1 {
            format!("library/{joined}")
        } else {
            joined
        };
        prop_assert_eq!(r.domain(), domain.as_deref().unwrap_or(DOCKER_HUB));
        prop_assert_eq!(r.path(), want_path.as_str());
        prop_assert_eq!(r.tag(), tag.as_deref());
        prop_assert_eq!(r.digest(), digest.as_deref());
        let full = ImageReference::parse(&r.to_string(), Syntax::Strict).expect("full form");
        prop_assert_eq!(full.name(), r.name());
        prop_assert_eq!(full.tag_or_digest(), r.tag_or_digest());
        let familiar =
            ImageReference::parse(&r.familiar_name(), Syntax::Strict).expect("familiar name");
        prop_assert_eq!(familiar.name(), r.name());
    }
}
