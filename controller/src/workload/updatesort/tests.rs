use super::super::podutil::testpod::*;
use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::appspub::{UpdatePriorityOrderTerm, UpdatePriorityWeightTerm};

fn names(pods: &[&Pod], idx: &[usize]) -> Vec<String> {
    idx.iter()
        .map(|&i| podutil::name(pods[i]).to_string())
        .collect()
}

#[test]
fn weight_priority() {
    let pods = [
        pod("a").running_ready(0).label("tier", "low").build(),
        pod("b").running_ready(0).label("tier", "high").build(),
        pod("c").running_ready(0).build(),
    ];
    let refs: Vec<&Pod> = pods.iter().collect();
    let strategy = UpdatePriorityStrategy {
        weight_priority: vec![
            UpdatePriorityWeightTerm {
                weight: 50,
                match_selector: LabelSelector {
                    match_labels: Some([("tier".to_string(), "high".to_string())].into()),
                    ..Default::default()
                },
            },
            UpdatePriorityWeightTerm {
                weight: 10,
                match_selector: LabelSelector {
                    match_labels: Some([("tier".to_string(), "low".to_string())].into()),
                    ..Default::default()
                },
            },
        ],
        ..Default::default()
    };
    let mut idx = vec![0, 1, 2];
    sort_by_priority(&strategy, &refs, &mut idx);
    assert_eq!(names(&refs, &idx), vec!["b", "a", "c"]);
}

#[test]
fn order_priority() {
    let pods = [
        pod("a").label("order", "sts-2").build(),
        pod("b").label("order", "sts-10").build(),
        pod("c").build(),
        pod("d").label("other", "x-7").build(),
    ];
    let refs: Vec<&Pod> = pods.iter().collect();
    let strategy = UpdatePriorityStrategy {
        order_priority: vec![
            UpdatePriorityOrderTerm {
                ordered_key: "order".into(),
            },
            UpdatePriorityOrderTerm {
                ordered_key: "other".into(),
            },
        ],
        ..Default::default()
    };
    let mut idx = vec![0, 1, 2, 3];
    sort_by_priority(&strategy, &refs, &mut idx);
    // No key first (level -1), then level 0 by descending suffix, then level 1.
    assert_eq!(names(&refs, &idx), vec!["c", "b", "a", "d"]);
}

#[test]
fn int_suffixes() {
    assert_eq!(int_suffix("sts-10"), 10);
    assert_eq!(int_suffix("abc"), 0);
    assert_eq!(int_suffix("7"), 7);
    assert_eq!(int_suffix(""), 0);
}

#[test]
fn selector_expressions() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    let labels: BTreeMap<String, String> = [("a".to_string(), "1".to_string())].into();
    let sel = |op: &str, vals: Option<Vec<&str>>| LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "a".into(),
            operator: op.into(),
            values: vals.map(|v| v.into_iter().map(String::from).collect()),
        }]),
        ..Default::default()
    };
    assert!(selector::matches(&sel("In", Some(vec!["1", "2"])), &labels));
    assert!(!selector::matches(&sel("NotIn", Some(vec!["1"])), &labels));
    assert!(selector::matches(&sel("Exists", None), &labels));
    assert!(!selector::matches(&sel("DoesNotExist", None), &labels));
    assert!(!selector::matches(&sel("Bogus", None), &labels));
}

#[test]
fn scatter_spreads_matching_pods() {
    // Four pods with zone=a and four without: matched pods should not all come first.
    let pods: Vec<Pod> = (0..8)
        .map(|i| {
            let p = pod(&format!("p{i}"));
            if i < 4 {
                p.label("zone", "a").build()
            } else {
                p.build()
            }
        })
        .collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    let terms = vec![UpdateScatterTerm {
        key: "zone".into(),
        value: "a".into(),
    }];
    let idx = scatter(&terms, &refs, (0..8).collect());
    assert_eq!(idx.len(), 8);
    let first_four: usize = idx[..4].iter().filter(|&&i| i < 4).count();
    assert!(
        first_four <= 2,
        "matched pods bunched at the front: {idx:?}"
    );
    assert_eq!(*idx.last().expect("last"), 3);
    let mut sorted = idx.clone();
    sorted.sort();
    assert_eq!(sorted, (0..8).collect::<Vec<_>>());
}
