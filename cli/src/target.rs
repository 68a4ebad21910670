//! Parsing of `TYPE/NAME` targets as kubectl users type them.

use crate::view::workload::Kind;
use std::fmt;
use std::str::FromStr;

/// A parsed `TYPE/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub kind: Kind,
    pub name: String,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind.type_name(), self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("expected TYPE/NAME (for example cloneset/web), got {0:?}")]
    Shape(String),
    #[error(
        "unknown kind {0:?}: supported are cloneset (clone, clonesets.apps.kruise.io), deployment (deploy), statefulset (sts), daemonset (ds), asts (statefulset.apps.kruise.io), ads (daemon, daemonset.apps.kruise.io), sidecarset, broadcastjob (bcj) and uniteddeployment (ud)"
    )]
    UnknownKind(String),
    #[error("{0:?} is not a valid object name (lowercase RFC 1123 subdomain expected)")]
    BadName(String),
}

/// The kind a `TYPE` spelling names (`asts`, `statefulset.apps.kruise.io`, `deploy`).
pub fn parse_kind(raw: &str) -> Result<Kind, TargetError> {
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
    // Bare spellings go to the first kind that takes them (`statefulset` is apps/v1, as in
    // kubectl); a group picks among the kinds of that group.
    Kind::ALL
        .into_iter()
        .find(|k| {
            let spec = k.spec();
            match group.as_deref() {
                None => spec.bare.contains(&resource.as_str()),
                Some(g) => {
                    g == spec.group
                        && (spec.bare.contains(&resource.as_str())
                            || spec.grouped.contains(&resource.as_str()))
                }
            }
        })
        .ok_or_else(|| TargetError::UnknownKind(raw.to_string()))
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
            ("sts/web", Kind::StatefulSet),
            ("statefulset/web", Kind::StatefulSet),
            ("statefulsets.apps/web", Kind::StatefulSet),
            ("ds/web", Kind::DaemonSet),
            ("daemonsets.v1.apps/web", Kind::DaemonSet),
            ("asts/web", Kind::AdvancedStatefulSet),
            ("statefulset.apps.kruise.io/web", Kind::AdvancedStatefulSet),
            ("sts.apps.kruise.io/web", Kind::AdvancedStatefulSet),
            (
                "statefulsets.v1beta1.apps.kruise.io/web",
                Kind::AdvancedStatefulSet,
            ),
            ("ads/web", Kind::AdvancedDaemonSet),
            ("daemon/web", Kind::AdvancedDaemonSet),
            ("daemonset.apps.kruise.io/web", Kind::AdvancedDaemonSet),
            ("sidecarset/web", Kind::SidecarSet),
            ("sidecarsets.apps.kruise.io/web", Kind::SidecarSet),
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
            "replicaset/web".parse::<Target>(),
            Err(TargetError::UnknownKind(_))
        ));
        assert!(matches!(
            "asts.apps/web".parse::<Target>(),
            Err(TargetError::UnknownKind(_))
        ));
        assert!(matches!(
            "sidecarset.apps/web".parse::<Target>(),
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
        for input in [
            "asts/db",
            "ads/agent",
            "sts/db",
            "ds/agent",
            "sidecarset/proxy",
        ] {
            let t: Target = input.parse().unwrap();
            assert_eq!(t.to_string().parse::<Target>().unwrap(), t, "{input}");
        }
    }
}
