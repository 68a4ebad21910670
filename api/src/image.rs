//! Image references (`[registry/]repository[:tag][@digest]`), parsed once for every crate: the
//! webhook's admission rules, the NodeImage keys the manager writes, the daemon's registry
//! credentials and the plugin's comparisons.
//!
//! Docker's defaults apply: no registry means Docker Hub (`docker.io`, also written
//! `index.docker.io`), where a one-component repository is an official image under `library/`.
//! A `:` after the last `/` starts the tag (before it, it is a registry port); a digest wins
//! over a tag where one value is wanted, as upstream's `NormalizeImageRefToNameTag`.

use std::fmt;

/// Docker Hub's registry name, the default registry.
pub const DOCKER_HUB: &str = "docker.io";
/// The tag of a reference that names neither tag nor digest.
pub const DEFAULT_TAG: &str = "latest";
/// Docker Hub's legacy name, read as [`DOCKER_HUB`].
const LEGACY_DOCKER_HUB: &str = "index.docker.io";
/// Where Docker Hub keeps official (one-component) repositories.
const OFFICIAL_PREFIX: &str = "library/";
/// Longest tag the reference grammar allows.
const MAX_TAG_LEN: usize = 128;
/// Fewest hex digits of a digest the reference grammar allows.
const MIN_DIGEST_HEX: usize = 32;

/// What is wrong with a reference. The text names the problem only; each caller says which
/// reference it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ImageReferenceError {
    #[error("empty reference")]
    Empty,
    #[error("must not contain whitespace")]
    Whitespace,
    #[error("bad digest")]
    BadDigest,
    #[error("bad tag")]
    BadTag,
    #[error("empty path component")]
    EmptyPathComponent,
    #[error("repository name must be lowercase")]
    NotLowercase,
}

/// How much of the reference grammar [`ImageReference::parse`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// The whole grammar, as admission enforces it: no whitespace, a digest `algorithm:hex`
    /// with 32 or more hex digits, a tag of `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`, no empty path
    /// component, and a repository path of `[a-z0-9]` components joined by `.`, `_` or `-`.
    Strict,
    /// Only what telling repository and tag apart needs, for references already admitted: a
    /// digest with a `:`, a non-empty tag and repository, no capital in the repository path.
    Loose,
}

/// A parsed image reference, Docker's defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageReference {
    domain: String,
    path: String,
    tag: Option<String>,
    digest: Option<String>,
}

/// The reference cut at its separators, nothing judged or defaulted yet.
struct Parts<'a> {
    /// Everything before the tag and digest (registry and path).
    repo: &'a str,
    domain: Option<&'a str>,
    path: &'a str,
    tag: Option<&'a str>,
    digest: Option<&'a str>,
}

impl<'a> Parts<'a> {
    fn of(image: &'a str) -> Self {
        let (name, digest) = match image.split_once('@') {
            Some((n, d)) => (n, Some(d)),
            None => (image, None),
        };
        let last_slash = name.rfind('/').map_or(0, |i| i + 1);
        let (repo, tag) = match name[last_slash..].rfind(':') {
            Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
            None => (name, None),
        };
        // The first component is a registry only when something follows it and it looks like
        // a host (a dot, a port, or `localhost`).
        let (domain, path) = match repo.split_once('/') {
            Some((d, p)) if d.contains('.') || d.contains(':') || d == "localhost" => (Some(d), p),
            _ => (None, repo),
        };
        Parts {
            repo,
            domain,
            path,
            tag,
            digest,
        }
    }

    fn check(&self, image: &str, syntax: Syntax) -> Result<(), ImageReferenceError> {
        let strict = syntax == Syntax::Strict;
        if image.is_empty() {
            return Err(ImageReferenceError::Empty);
        }
        if strict && image.chars().any(char::is_whitespace) {
            return Err(ImageReferenceError::Whitespace);
        }
        if self.digest.is_some_and(|d| !digest_ok(d, strict)) {
            return Err(ImageReferenceError::BadDigest);
        }
        if self.tag.is_some_and(|t| !tag_ok(t, strict)) {
            return Err(ImageReferenceError::BadTag);
        }
        if self.repo.is_empty() || (strict && self.repo.split('/').any(str::is_empty)) {
            return Err(ImageReferenceError::EmptyPathComponent);
        }
        let path_ok = if strict {
            self.path.split('/').all(component_ok)
        } else {
            !self.path.chars().any(|c| c.is_ascii_uppercase())
        };
        if !path_ok {
            return Err(ImageReferenceError::NotLowercase);
        }
        Ok(())
    }
}

fn digest_ok(digest: &str, strict: bool) -> bool {
    match digest.split_once(':') {
        Some((alg, hex)) if strict => {
            !alg.is_empty()
                && hex.len() >= MIN_DIGEST_HEX
                && hex.bytes().all(|b| b.is_ascii_hexdigit())
        }
        Some(_) => true,
        None => false,
    }
}

fn tag_ok(tag: &str, strict: bool) -> bool {
    if !strict {
        return !tag.is_empty();
    }
    tag.len() <= MAX_TAG_LEN
        && tag
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

fn component_ok(component: &str) -> bool {
    component
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric())
        && component.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
}

impl ImageReference {
    /// Parses `image`, checking it by `syntax`.
    pub fn parse(image: &str, syntax: Syntax) -> Result<Self, ImageReferenceError> {
        let parts = Parts::of(image);
        parts.check(image, syntax)?;
        Ok(Self::from_parts(&parts))
    }

    /// Cuts `image` into its parts without judging it, for display and comparison of what a
    /// runtime or a user reports: never fails, and what does not parse gives odd parts.
    pub fn split(image: &str) -> Self {
        Self::from_parts(&Parts::of(image))
    }

    fn from_parts(p: &Parts<'_>) -> Self {
        let domain = match p.domain {
            None | Some(LEGACY_DOCKER_HUB) => DOCKER_HUB,
            Some(d) => d,
        };
        let path = if domain == DOCKER_HUB && !p.path.contains('/') {
            format!("{OFFICIAL_PREFIX}{}", p.path)
        } else {
            p.path.to_owned()
        };
        Self {
            domain: domain.to_owned(),
            path,
            tag: p.tag.map(str::to_owned),
            digest: p.digest.map(str::to_owned),
        }
    }

    /// The registry host (with its port), [`DOCKER_HUB`] when none is written.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The repository path in the registry (`library/nginx` for `nginx`).
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// The full repository name, `docker.io/library/nginx` for `nginx`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.domain, self.path)
    }

    /// The short name a person writes (upstream `FamiliarName`): Docker Hub's host and an
    /// official image's `library/` are left out; NodeImage keys its images by it.
    pub fn familiar_name(&self) -> String {
        if self.domain != DOCKER_HUB {
            return self.name();
        }
        match self.path.strip_prefix(OFFICIAL_PREFIX) {
            Some(short) if !short.contains('/') => short.to_owned(),
            _ => self.path.clone(),
        }
    }

    /// The digest, else the tag, else [`DEFAULT_TAG`]: the one value NodeImage keys a pull by.
    pub fn tag_or_digest(&self) -> &str {
        self.digest().or(self.tag()).unwrap_or(DEFAULT_TAG)
    }
}

/// The full reference, `docker.io/library/nginx:latest` for `nginx`: the tag defaults only when
/// there is no digest either.
impl fmt::Display for ImageReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.domain, self.path)?;
        match (&self.tag, &self.digest) {
            (None, None) => write!(f, ":{DEFAULT_TAG}"),
            (tag, digest) => {
                if let Some(t) = tag {
                    write!(f, ":{t}")?;
                }
                if let Some(d) = digest {
                    write!(f, "@{d}")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests;
