use super::*;
use serde_json::json;

fn cloneset() -> RolloutView {
    RolloutView::from_json(&json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "shop", "uid": "u1"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "updateStrategy": {"partition": 2},
                 "template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}},
        "status": {"replicas": 3, "updatedReplicas": 1,
                   "updateRevision": "web-2", "currentRevision": "web-1"}
    }))
}

fn pod(name: &str, revision: &str) -> PodView {
    PodView {
        name: name.into(),
        namespace: "shop".into(),
        revision: revision.into(),
        ..Default::default()
    }
}

fn usage(containers: &[(&str, &str, &str)]) -> PodUsage {
    PodUsage::from_pod_metrics(&json!({
        "containers": containers
            .iter()
            .map(|(n, cpu, mem)| json!({"name": n, "usage": {"cpu": cpu, "memory": mem}}))
            .collect::<Vec<_>>()
    }))
}

fn metrics(entries: &[(&str, PodUsage)]) -> Metrics {
    entries
        .iter()
        .map(|(name, u)| (("shop".to_owned(), (*name).to_owned()), u.clone()))
        .collect()
}

#[test]
fn pod_metrics_quantities_are_read_in_base_units() {
    let u = usage(&[("app", "1500000n", "2048Ki"), ("log", "2m", "1Mi")]);
    assert_eq!(
        u.containers["app"],
        Usage {
            cpu_nanocores: 1_500_000,
            memory_bytes: 2 * 1_048_576
        }
    );
    let total = u.total(None);
    assert_eq!(total.cpu_nanocores, 3_500_000);
    assert_eq!(total.memory_bytes, 3 * 1_048_576);
    let only: BTreeSet<String> = ["log".to_owned()].into();
    assert_eq!(u.total(Some(&only)).cpu_nanocores, 2_000_000);
    // Unreadable or missing quantities count as zero rather than failing the table.
    let odd = PodUsage::from_pod_metrics(
        &json!({"containers": [{"name": "x", "usage": {"cpu": "lots"}}]}),
    );
    assert_eq!(odd.total(None), Usage::default());
}

#[test]
fn revisions_are_summed_and_averaged_update_first() {
    let pods = [
        pod("web-a", "web-1"),
        pod("web-b", "web-1"),
        pod("web-c", "web-2"),
    ];
    let m = metrics(&[
        ("web-a", usage(&[("app", "4m", "10Mi")])),
        ("web-b", usage(&[("app", "2m", "20Mi")])),
        ("web-c", usage(&[("app", "9m", "40Mi")])),
    ]);
    let w = workload_usage(&cloneset(), &pods, &m);
    assert_eq!(w.target, "cloneset/web");
    assert_eq!(w.kind, "CloneSet");
    let got: Vec<_> = w
        .revisions
        .iter()
        .map(|r| {
            (
                r.revision.as_str(),
                r.role.as_str(),
                r.pods,
                r.pods_with_metrics,
                r.cpu_millicores,
                r.memory_mib,
                r.avg_cpu_millicores,
                r.avg_memory_mib,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("web-2", "update", 1, 1, 9.0, 40.0, Some(9.0), Some(40.0)),
            ("web-1", "current", 2, 2, 6.0, 30.0, Some(3.0), Some(15.0)),
        ]
    );
    let names: Vec<&str> = w.revisions[1]
        .pod_usage
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["web-a", "web-b"]);
}

#[test]
fn pods_without_metrics_are_counted_but_not_averaged() {
    let pods = [pod("web-a", "web-1"), pod("web-c", "web-2")];
    let m = metrics(&[("web-a", usage(&[("app", "4m", "10Mi")]))]);
    let w = workload_usage(&cloneset(), &pods, &m);
    let update = &w.revisions[0];
    assert_eq!((update.pods, update.pods_with_metrics), (1, 0));
    assert_eq!(update.avg_cpu_millicores, None);
    assert_eq!(update.pod_usage[0].cpu_millicores, None);
    let text = render(
        &TopReport {
            schema_version: 1,
            workloads: vec![w],
        },
        false,
    );
    assert!(text.contains("0/1"), "{text}");
    assert!(text.contains("PODS N/M"), "{text}");
}

#[test]
fn a_sidecarset_counts_only_its_sidecars_across_namespaces() {
    let view = RolloutView::from_json(&json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
        "metadata": {"name": "proxy", "uid": "s1",
                     "annotations": {"kruise.io/sidecarset-hash": "h2"}},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "containers": [{"name": "envoy", "image": "envoy:2"}]},
        "status": {"matchedPods": 2}
    }));
    let injected = |ns: &str, name: &str, hash: &str| PodView {
        name: name.into(),
        namespace: ns.into(),
        sidecar_hashes: [("proxy".to_owned(), hash.to_owned())].into(),
        ..Default::default()
    };
    let pods = [
        injected("a", "web-1", "h2"),
        injected("b", "web-1", "h1"),
        // Not injected by this SidecarSet: left out.
        PodView {
            name: "other".into(),
            namespace: "a".into(),
            ..Default::default()
        },
    ];
    let both = usage(&[("app", "100m", "100Mi"), ("envoy-1", "3m", "8Mi")]);
    let m: Metrics = [
        (("a".to_owned(), "web-1".to_owned()), both.clone()),
        (
            ("b".to_owned(), "web-1".to_owned()),
            usage(&[("envoy", "1m", "4Mi")]),
        ),
        (("a".to_owned(), "other".to_owned()), both),
    ]
    .into();
    let w = workload_usage(&view, &pods, &m);
    let got: Vec<_> = w
        .revisions
        .iter()
        .map(|r| {
            (
                r.revision.as_str(),
                r.role.as_str(),
                r.cpu_millicores,
                r.memory_mib,
            )
        })
        .collect();
    assert_eq!(got, vec![("h2", "update", 3.0, 8.0), ("h1", "", 1.0, 4.0)]);
    assert_eq!(w.revisions[1].pod_usage[0].namespace, "b");
}

#[test]
fn the_table_aligns_columns_and_shows_namespaces_only_with_all() {
    let pods = [pod("web-a", "web-1"), pod("web-c", "web-2")];
    let m = metrics(&[
        ("web-a", usage(&[("app", "1500000n", "10Mi")])),
        ("web-c", usage(&[("app", "0", "12582912")])),
    ]);
    let empty = RolloutView::from_json(&json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "shop", "uid": "u2"},
        "spec": {"replicas": 0}
    }));
    let report = TopReport {
        schema_version: 1,
        workloads: vec![
            workload_usage(&cloneset(), &pods, &m),
            workload_usage(&empty, &[], &m),
        ],
    };
    let text = render(&report, false);
    let expected = "\
WORKLOAD      REVISION  ROLE     PODS  CPU(m)  CPU/POD(m)  MEMORY(MiB)  MEMORY/POD(MiB)
cloneset/web  web-2     update      1       0           0         12.0             12.0
cloneset/web  web-1     current     1       2           2         10.0             10.0
asts/db       -         -           0       -           -            -                -
";
    assert_eq!(text, expected);
    let all = render(&report, true);
    assert!(all.starts_with("NAMESPACE  WORKLOAD"), "{all}");
    assert!(all.contains("\nshop       cloneset/web"), "{all}");
}

#[test]
fn an_empty_scope_says_so() {
    let report = TopReport {
        schema_version: 1,
        workloads: Vec::new(),
    };
    assert_eq!(
        render(&report, false),
        "No Kruise workloads found in this namespace.\n"
    );
    assert_eq!(render(&report, true), "No Kruise workloads found.\n");
}

#[test]
fn the_json_document_names_its_units() {
    let pods = [pod("web-a", "web-1")];
    let m = metrics(&[("web-a", usage(&[("app", "4m", "10Mi")]))]);
    let doc = serde_json::to_value(TopReport {
        schema_version: 1,
        workloads: vec![workload_usage(&cloneset(), &pods, &m)],
    })
    .unwrap();
    let r = &doc["workloads"][0]["revisions"][0];
    assert_eq!(doc["schemaVersion"], 1);
    assert_eq!(r["role"], "current");
    assert_eq!(r["cpuMillicores"], 4.0);
    assert_eq!(r["memoryMiB"], 10.0);
    assert_eq!(r["avgMemoryMiB"], 10.0);
    assert_eq!(r["podsWithMetrics"], 1);
    assert_eq!(r["podUsage"][0]["name"], "web-a");
}

#[test]
fn the_unavailable_message_says_what_kubectl_top_says_and_what_to_do() {
    let e = metrics_unavailable("the server could not find the requested resource");
    assert_eq!(e.exit_code(), exit::FAILED);
    let text = e.to_string();
    assert!(text.starts_with("Metrics API not available"), "{text}");
    assert!(text.contains("metrics.k8s.io/v1beta1"), "{text}");
    assert!(text.contains("metrics-server"), "{text}");
    assert!(text.contains("v1beta1.metrics.k8s.io"), "{text}");
}
