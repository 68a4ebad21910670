//! docs/feature-gates.md is generated from `api/src/features.rs` (names, defaults, maturity,
//! what we ship, and each gate's [`Effect`]), and cli/README.md's list of the gates without
//! effect is the same list. This test fails when either drifts; `make docs` (this test with
//! `KRUISE_UPDATE_DOCS=1`) rewrites them.

use std::path::{Path, PathBuf};

use kruise_api::features::{self, Effect, Gate};

const UPDATE: &str = "KRUISE_UPDATE_DOCS";
const BEGIN: &str = "<!-- gates-without-effect: generated from api/src/features.rs (make docs) -->";
const END: &str = "<!-- gates-without-effect: end -->";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

fn effect_cell(effect: Effect) -> String {
    match effect {
        Effect::Implemented(what) => format!("yes: {what}"),
        Effect::Partial(what, missing) => format!("**in part**: {what}; missing: {missing}"),
        Effect::Missing(missing) => format!("**no**: {missing}"),
        Effect::UnusedUpstream => "none, as upstream (declared there, read nowhere)".to_owned(),
    }
}

fn without_effect() -> Vec<Gate> {
    Gate::ALL
        .iter()
        .copied()
        .filter(|g| g.effect().missing().is_some())
        .collect()
}

fn render_doc() -> String {
    let shipped = features::shipped();
    let mut out = String::from(
        "# Feature gates\n\n\
<!-- Generated from api/src/features.rs by api/tests/feature_gates_doc.rs: edit the gates! table \
there and run `make docs`. -->\n\n\
`kruise-manager` and `kruise-daemon` take `--feature-gates` with OpenKruise v1.9's names and\n\
syntax (`Name=true,Other=false`, `AllAlpha=true`, `AllBeta=true`); an unknown gate or value stops\n\
the process at start with a message naming it. **The binaries' defaults are OpenKruise's,\n\
exactly**, and upstream's rules between gates apply (`PodWebhook=false` turns the Pod-webhook\n\
gates off, `KruiseDaemon=false` the daemon's, pre-download turns `ImagePullJobGate` on,\n\
`ResourcesDeletionProtection=false` turns its CRD cascading variant off).\n\n\
What we ship (`deploy/`, the Helm chart's default `featureGates`, `kubectl kruise install` and\n\
`kubectl kruise dev`) turns on the gates marked *on* in the column \"shipped\": features this\n\
project is about, which act only on objects a user creates or labels for them. Bring\n\
OpenKruise's Helm values and you get OpenKruise's behaviour: the chart passes `featureGates`\n\
exactly as given (`\"\"` passes no flag, hence upstream's defaults).\n\n\
A gate marked **no** or **in part** is accepted and (partly) ignored: when it is on, both\n\
binaries log a warning at start naming it and what is missing, and `kubectl kruise check` lists\n\
it on its `feature gates` line beside the gates that differ from OpenKruise's defaults.\n\n\
| gate | maturity | upstream default | shipped | takes effect here |\n\
|---|---|---|---|---|\n",
    );
    for g in Gate::ALL {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            g.name(),
            g.maturity().as_str(),
            on_off(g.upstream_default()),
            on_off(shipped.enabled(*g)),
            effect_cell(g.effect()).replace('|', "\\|"),
        ));
    }
    out.push_str(&format!(
        "\nShipped flag: `--feature-gates={}`.\n",
        shipped.to_flag()
    ));
    out
}

fn render_cli_block() -> String {
    let names: Vec<String> = without_effect()
        .iter()
        .map(|g| format!("`{}`", g.name()))
        .collect();
    let list = if names.is_empty() {
        "Every feature gate of OpenKruise v1.9.0 has its effect in Kruise-rs.".to_string()
    } else {
        format!(
            "Gates Kruise-rs accepts without (full) effect: {}. Turned on, each is logged as a \
             warning at start and listed by `kubectl kruise check`.",
            names.join(", ")
        )
    };
    format!(
        "{BEGIN}\n{list} Every gate and what it does here: \
         [docs/feature-gates.md](../docs/feature-gates.md).\n{END}"
    )
}

/// Compares `path` with `want`, or writes it when asked to; returns the problem if any.
fn compare_or_write(path: &Path, want: &str) -> Option<String> {
    if std::env::var_os(UPDATE).is_some() {
        std::fs::write(path, want).expect("write");
        return None;
    }
    match std::fs::read_to_string(path) {
        Ok(have) if have == want => None,
        Ok(_) => Some(format!("{} is stale", path.display())),
        Err(e) => Some(format!("{} cannot be read: {e}", path.display())),
    }
}

#[test]
fn feature_gates_doc_is_generated_from_the_gates() {
    let problem = compare_or_write(&root().join("docs/feature-gates.md"), &render_doc());
    assert!(
        problem.is_none(),
        "{}: run `make docs` ({UPDATE}=1 cargo test -p kruise-api --test feature_gates_doc)",
        problem.unwrap_or_default()
    );
}

#[test]
fn cli_readme_lists_the_gates_without_effect() {
    let path = root().join("cli/README.md");
    let text = std::fs::read_to_string(&path).expect("cli/README.md");
    let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
        panic!("cli/README.md lacks the block between {BEGIN} and {END}");
    };
    let want = format!(
        "{}{}{}",
        &text[..b],
        render_cli_block(),
        &text[e + END.len()..]
    );
    let problem = compare_or_write(&path, &want);
    assert!(
        problem.is_none(),
        "{}: run `make docs`",
        problem.unwrap_or_default()
    );
    // Nothing else in it may claim that no gate takes effect.
    assert!(
        !want.contains("no optional features"),
        "stale claim in cli/README.md"
    );
}

#[test]
fn readme_sends_readers_to_the_generated_page() {
    let text = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    assert!(
        text.contains("(docs/feature-gates.md)"),
        "README.md must link docs/feature-gates.md"
    );
    for g in without_effect() {
        // The README keeps no list of its own that could disagree with the page.
        assert!(
            !text.contains(&format!("`{}`", g.name())),
            "README.md names {g}; say it in api/src/features.rs instead"
        );
    }
}
