//! The shipped Grafana dashboard (deploy/grafana) charts only metrics the manager exports.

use std::collections::BTreeSet;

use kruise_runtime::metrics::RecordReconcile;
use kruise_webhook::metrics::{KindNamespaceNameLabels, NameLabels};

use super::Metrics;
use crate::inplace::InPlaceObserver;

const DASHBOARD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/grafana/kruise-rs-workloads.json"
);

/// Every series name the manager can export: from the `# TYPE` lines of a leading manager with
/// workload metrics on and a sample in every family (an empty family is not written), with the
/// suffixes the text format adds to counters and histograms.
fn exported() -> BTreeSet<String> {
    let m = Metrics::new();
    m.is_leader.set(1);
    m.reconciled(
        "cloneset",
        std::time::Duration::from_millis(5),
        Some("kube"),
    );
    m.update_started("cloneset");
    m.update_ready("cloneset", std::time::Duration::from_secs(1));
    m.recreate_started("cloneset");
    m.inplace_completed("cloneset");
    let object = KindNamespaceNameLabels {
        kind_namespace_name: "CloneSet_ns_web".into(),
        username: "u".into(),
    };
    let name = NameLabels {
        name: "ns".into(),
        username: "u".into(),
    };
    let p = &m.protection;
    p.pod_unavailable_budget.get_or_create(&object).inc();
    p.workload_deletion_protection.get_or_create(&object).inc();
    p.namespace_deletion_protection.get_or_create(&name).inc();
    p.crd_deletion_protection.get_or_create(&name).inc();
    let text = m.encode().expect("encode");
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if (words.next(), words.next()) != (Some("#"), Some("TYPE")) {
            continue;
        }
        let (Some(name), Some(kind)) = (words.next(), words.next()) else {
            continue;
        };
        match kind {
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_count", "_sum"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            _ => {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// The `kruise_*` names a PromQL expression reads.
fn names_in(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("kruise_") {
        let word: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + word.len()..];
        out.push(word);
    }
    out
}

/// Every PromQL expression in the dashboard: panel targets and templating queries.
fn queries(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr", serde_json::Value::String(s)) => out.push(s.clone()),
                    ("query", serde_json::Value::String(s)) if s.contains("kruise_") => {
                        out.push(s.clone())
                    }
                    _ => queries(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| queries(v, out)),
        _ => {}
    }
}

#[test]
fn every_dashboard_query_names_an_exported_metric() {
    let text = std::fs::read_to_string(DASHBOARD).expect("dashboard");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("dashboard is JSON");
    let exported = exported();
    let mut exprs = Vec::new();
    queries(&dashboard, &mut exprs);
    assert!(exprs.len() >= 15, "only {} queries found", exprs.len());
    let mut unknown = BTreeSet::new();
    for expr in &exprs {
        let names = names_in(expr);
        assert!(
            !names.is_empty(),
            "a query with no Kruise-rs metric: {expr}"
        );
        unknown.extend(names.into_iter().filter(|n| !exported.contains(n)));
    }
    assert!(
        unknown.is_empty(),
        "the dashboard reads metrics the manager does not export: {unknown:?}"
    );
}

#[test]
fn names_are_read_out_of_promql() {
    assert_eq!(
        names_in("sum(rate(kruise_a_total[5m])) / kruise_b{x=\"kruise_c\"}"),
        vec!["kruise_a_total", "kruise_b", "kruise_c"]
    );
}
