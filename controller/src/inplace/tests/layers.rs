//! The engine's imports flow one way (see the module docs of `inplace`): a module may use only
//! the layers below it. A new import against the flow fails here instead of in review.

/// (module, its source, the engine modules it must not import).
const LAYERS: [(&str, &str, &[&str]); 8] = [
    (
        "spec",
        include_str!("../spec.rs"),
        &["hooks", "plan", "apply", "patch", "conditions"],
    ),
    (
        "batches",
        include_str!("../batches.rs"),
        &["hooks", "plan", "apply", "patch", "conditions"],
    ),
    (
        "completion",
        include_str!("../completion.rs"),
        &["hooks", "plan", "apply", "patch", "conditions"],
    ),
    (
        "conditions",
        include_str!("../conditions.rs"),
        &["hooks", "plan", "apply", "patch"],
    ),
    (
        "patch",
        include_str!("../patch.rs"),
        &["hooks", "plan", "apply", "conditions"],
    ),
    ("hooks", include_str!("../hooks.rs"), &["plan", "apply"]),
    ("plan", include_str!("../plan.rs"), &["apply"]),
    ("apply", include_str!("../apply.rs"), &[]),
];

/// The engine modules a source file names in a `use super::…` line.
fn imports(src: &str) -> Vec<String> {
    src.lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("use super::"))
        .flat_map(|rest| {
            let rest = rest.trim_end_matches(';');
            let inner = rest
                .strip_prefix('{')
                .and_then(|r| r.strip_suffix('}'))
                .unwrap_or(rest);
            inner
                .split(',')
                .map(|p| p.trim().split("::").next().unwrap_or("").to_string())
                .collect::<Vec<_>>()
        })
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn imports_flow_one_way() {
    for (name, src, forbidden) in LAYERS {
        let used = imports(src);
        assert!(
            name == "batches" || !used.is_empty(),
            "{name}: parsed no imports"
        );
        for m in used {
            assert!(
                !forbidden.contains(&m.as_str()),
                "inplace::{name} imports inplace::{m}, against the spec/batches/completion/conditions/patch -> hooks -> plan -> apply flow"
            );
        }
    }
}
