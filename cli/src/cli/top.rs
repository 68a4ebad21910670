//! `kubectl kruise top`'s arguments.

use crate::target::{Target, TargetError, parse_kind};
use crate::view::workload::Kind;

use super::Output;

/// `kubectl kruise top`.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// What to show: `workloads` (default: every CloneSet, Advanced StatefulSet, Advanced
    /// DaemonSet and SidecarSet of the namespace), a kind (`cloneset`, `asts`, `ads`,
    /// `sidecarset`, also `deploy`, `sts`, `ds`, `ud`) or one workload `TYPE/NAME`.
    #[arg(value_parser = parse_scope, value_name = "workloads|TYPE|TYPE/NAME")]
    pub target: Option<Scope>,
    /// All namespaces.
    #[arg(short = 'A', long = "all-namespaces")]
    pub all_namespaces: bool,
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: Output,
}

/// Which workloads `top` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The Kruise kinds the cluster serves: CloneSet, Advanced StatefulSet and DaemonSet,
    /// SidecarSet.
    Workloads,
    Kind(Kind),
    One(Target),
}

// Keeps the typed error so `main` tells an unknown kind (exit 6) from other usage errors.
fn parse_scope(s: &str) -> Result<Scope, TargetError> {
    if s.eq_ignore_ascii_case("workloads") {
        Ok(Scope::Workloads)
    } else if s.contains('/') {
        s.parse().map(Scope::One)
    } else {
        parse_kind(s).map(Scope::Kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scope_argument_takes_workloads_a_kind_or_one_target() {
        assert_eq!(parse_scope("workloads").unwrap(), Scope::Workloads);
        assert_eq!(
            parse_scope("asts").unwrap(),
            Scope::Kind(Kind::AdvancedStatefulSet)
        );
        assert!(matches!(parse_scope("cloneset/web").unwrap(), Scope::One(t) if t.name == "web"));
        assert!(matches!(
            parse_scope("jobs"),
            Err(TargetError::UnknownKind(_))
        ));
    }
}
