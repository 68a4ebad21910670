//! Parsing of `TYPE/NAME` targets as kubectl users type them.

use k8s_openapi::Resource;
use k8s_openapi::api::apps::v1::Deployment;
use kruise_api::keys;
use std::fmt;
use std::str::FromStr;

/// Workload kinds the rollout commands understand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    CloneSet,
    Deployment,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::CloneSet => "CloneSet",
            Kind::Deployment => "Deployment",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parsed `TYPE/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub kind: Kind,
    pub name: String,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ty = match self.kind {
            Kind::CloneSet => "cloneset",
            Kind::Deployment => "deployment",
        };
        write!(f, "{ty}/{}", self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("expected TYPE/NAME (for example cloneset/web), got {0:?}")]
    Shape(String),
    #[error(
        "unknown kind {0:?}: supported are cloneset (clone, clonesets, clonesets.apps.kruise.io) and deployment (deploy, deployments, deployments.apps)"
    )]
    UnknownKind(String),
    #[error("{0:?} is not a valid object name (lowercase RFC 1123 subdomain expected)")]
    BadName(String),
}

fn parse_kind(raw: &str) -> Result<Kind, TargetError> {
    let lower = raw.to_ascii_lowercase();
    // `resource.group` and `resource.version.group` spellings are accepted as kubectl does;
    // only the resource part and a matching group matter.
    let (resource, group) = match lower.split_once('.') {
        Some((r, rest)) => {
            // Strip an optional version segment such as `v1beta1.apps.kruise.io`.
            let group = match rest.split_once('.') {
                Some((maybe_version, g))
                    if maybe_version.starts_with('v')
                        && maybe_version[1..].starts_with(|c: char| c.is_ascii_digit()) =>
                {
                    g.to_string()
                }
                _ => rest.to_string(),
            };
            (r.to_string(), Some(group))
        }
        None => (lower.clone(), None),
    };
    let kind = match resource.as_str() {
        "clone" | "clones" | "cloneset" | "clonesets" => Kind::CloneSet,
        "deploy" | "deployment" | "deployments" => Kind::Deployment,
        _ => return Err(TargetError::UnknownKind(raw.to_string())),
    };
    match (kind, group.as_deref()) {
        (_, None) => Ok(kind),
        (Kind::CloneSet, Some(keys::APPS_GROUP)) => Ok(kind),
        (Kind::Deployment, Some(<Deployment as Resource>::GROUP)) => Ok(kind),
        _ => Err(TargetError::UnknownKind(raw.to_string())),
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (ty, name) = s
            .split_once('/')
            .ok_or_else(|| TargetError::Shape(s.to_string()))?;
        if ty.is_empty() || name.contains('/') {
            return Err(TargetError::Shape(s.to_string()));
        }
        let kind = parse_kind(ty)?;
        if !valid_name(name) {
            return Err(TargetError::BadName(name.to_string()));
        }
        Ok(Target {
            kind,
            name: name.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_spellings() {
        let cases = [
            ("clone/web", Kind::CloneSet),
            ("cloneset/web", Kind::CloneSet),
            ("clonesets/web", Kind::CloneSet),
            ("CloneSet/web", Kind::CloneSet),
            ("clonesets.apps.kruise.io/web", Kind::CloneSet),
            ("clonesets.v1alpha1.apps.kruise.io/web", Kind::CloneSet),
            ("deployment/web", Kind::Deployment),
            ("deploy/web", Kind::Deployment),
            ("deployments.apps/web", Kind::Deployment),
        ];
        for (input, kind) in cases {
            let t: Target = input.parse().unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(t.kind, kind, "{input}");
            assert_eq!(t.name, "web", "{input}");
        }
    }

    #[test]
    fn rejected_spellings() {
        assert!(matches!(
            "web".parse::<Target>(),
            Err(TargetError::Shape(_))
        ));
        assert!(matches!(
            "/web".parse::<Target>(),
            Err(TargetError::Shape(_))
        ));
        assert!(matches!(
            "a/b/c".parse::<Target>(),
            Err(TargetError::Shape(_))
        ));
        assert!(matches!(
            "statefulset/web".parse::<Target>(),
            Err(TargetError::UnknownKind(_))
        ));
        assert!(matches!(
            "clonesets.apps/web".parse::<Target>(),
            Err(TargetError::UnknownKind(_))
        ));
        assert!(matches!(
            "deployments.apps.kruise.io/web".parse::<Target>(),
            Err(TargetError::UnknownKind(_))
        ));
        assert!(matches!(
            "clone/Web".parse::<Target>(),
            Err(TargetError::BadName(_))
        ));
        assert!(matches!(
            "clone/".parse::<Target>(),
            Err(TargetError::BadName(_))
        ));
    }

    #[test]
    fn display_round_trips() {
        let t: Target = "clone/web".parse().unwrap();
        assert_eq!(t.to_string(), "cloneset/web");
        assert_eq!(t.to_string().parse::<Target>().unwrap(), t);
    }
}
