//! Label selectors (`metav1.LabelSelector`): the rules apimachinery's `ValidateLabelSelector`
//! enforces, and matching as upstream's `ValidatedLabelSelectorAsSelector(...).Matches(...)`
//! does it. The webhook validates with [`violations`]; controllers match with [`matches()`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// A `matchExpressions` operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    /// The label is set to one of the values.
    In,
    /// The label is unset or set to none of the values.
    NotIn,
    /// The label is set.
    Exists,
    /// The label is unset.
    DoesNotExist,
}

impl Operator {
    /// Every operator, as spelled on the wire.
    pub const NAMES: [&'static str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

    /// The operator spelled `s`, if it is one.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "In" => Some(Self::In),
            "NotIn" => Some(Self::NotIn),
            "Exists" => Some(Self::Exists),
            "DoesNotExist" => Some(Self::DoesNotExist),
            _ => None,
        }
    }

    /// Whether the operator takes a list of values (In, NotIn) or none (Exists, DoesNotExist).
    pub fn takes_values(self) -> bool {
        matches!(self, Self::In | Self::NotIn)
    }
}

/// One rule a `matchExpressions` entry breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// `key` is empty.
    KeyRequired,
    /// `values` is empty for In or NotIn.
    ValuesRequired,
    /// `values` is set for Exists or DoesNotExist.
    ValuesForbidden,
    /// `operator` is none of [`Operator::NAMES`].
    InvalidOperator(String),
}

/// The rules one requirement breaks, key first (apimachinery's order).
pub fn requirement_violations(key: &str, operator: &str, values: usize) -> Vec<Violation> {
    let mut out = Vec::new();
    if key.is_empty() {
        out.push(Violation::KeyRequired);
    }
    match Operator::parse(operator) {
        Some(op) if op.takes_values() && values == 0 => out.push(Violation::ValuesRequired),
        Some(op) if !op.takes_values() && values > 0 => out.push(Violation::ValuesForbidden),
        Some(_) => {}
        None => out.push(Violation::InvalidOperator(operator.to_owned())),
    }
    out
}

/// Every rule the selector's `matchExpressions` break, with the index of the expression.
pub fn violations(selector: &LabelSelector) -> Vec<(usize, Violation)> {
    selector
        .match_expressions
        .iter()
        .flatten()
        .enumerate()
        .flat_map(|(i, e)| {
            requirement_violations(&e.key, &e.operator, e.values.as_ref().map_or(0, Vec::len))
                .into_iter()
                .map(move |v| (i, v))
        })
        .collect()
}

fn requirement_matches(e: &LabelSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let have = labels.get(&e.key);
    let values = e.values.as_deref().unwrap_or_default();
    match Operator::parse(&e.operator) {
        Some(Operator::In) => have.is_some_and(|v| values.contains(v)),
        Some(Operator::NotIn) => have.is_none_or(|v| !values.contains(v)),
        Some(Operator::Exists) => have.is_some(),
        Some(Operator::DoesNotExist) => have.is_none(),
        // Upstream refuses to build the selector: it matches nothing.
        None => false,
    }
}

/// Whether `labels` satisfy every `matchLabels` entry and every `matchExpressions` requirement.
/// An empty selector matches everything; one with an unknown operator matches nothing. Values
/// are not validated here (upstream's fast path does not either); the webhook refuses bad ones.
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
        && selector
            .match_expressions
            .iter()
            .flatten()
            .all(|e| requirement_matches(e, labels))
}

/// The selector in Kubernetes' string form (`a=b,c in (d,e),!f`), as upstream's
/// `LabelSelectorAsSelector(...).String()` writes it into `status.labelSelector`: requirements
/// sorted by key, values sorted. `None` when an operator is unknown (upstream has no selector
/// to print then).
pub fn to_selector_string(selector: &LabelSelector) -> Option<String> {
    let mut reqs: Vec<(&str, String)> = Vec::new();
    for (k, v) in selector.match_labels.iter().flatten() {
        reqs.push((k, format!("{k}={v}")));
    }
    for e in selector.match_expressions.iter().flatten() {
        let mut values: Vec<&str> = e.values.iter().flatten().map(String::as_str).collect();
        values.sort_unstable();
        values.dedup();
        let k = &e.key;
        let text = match Operator::parse(&e.operator)? {
            Operator::In => format!("{k} in ({})", values.join(",")),
            Operator::NotIn => format!("{k} notin ({})", values.join(",")),
            Operator::Exists => k.clone(),
            Operator::DoesNotExist => format!("!{k}"),
        };
        reqs.push((k, text));
    }
    // Stable: requirements of one key keep their order, as upstream's sort by key leaves them.
    reqs.sort_by(|a, b| a.0.cmp(b.0));
    Some(
        reqs.into_iter()
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// Whether the selector has no requirement at all (and so matches everything).
pub fn is_empty(selector: &LabelSelector) -> bool {
    selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty)
}

/// Whether two selectors constrain exactly the same keys in compatible ways (upstream
/// `IsSelectorLooseOverlap`, PodUnavailableBudget's conflict rule): matchLabels count as `In`
/// with one value; a key only one of them constrains means no overlap.
pub fn loose_overlap(a: &LabelSelector, b: &LabelSelector) -> bool {
    let (ea, eb) = (requirements_by_key(a), requirements_by_key(b));
    ea.iter()
        .all(|(k, x)| eb.get(k).is_some_and(|y| requirement_overlap(x, y)))
        && eb
            .iter()
            .all(|(k, y)| ea.get(k).is_some_and(|x| requirement_overlap(y, x)))
}

/// (operator, values) by key; a matchLabels entry replaces an expression on the same key.
fn requirements_by_key(s: &LabelSelector) -> BTreeMap<String, (String, Vec<String>)> {
    let mut m = BTreeMap::new();
    for e in s.match_expressions.iter().flatten() {
        m.insert(
            e.key.clone(),
            (e.operator.clone(), e.values.clone().unwrap_or_default()),
        );
    }
    for (k, v) in s.match_labels.iter().flatten() {
        m.insert(k.clone(), ("In".to_owned(), vec![v.clone()]));
    }
    m
}

fn requirement_overlap(x: &(String, Vec<String>), y: &(String, Vec<String>)) -> bool {
    let contains_all = |a: &[String], b: &[String]| b.iter().all(|v| a.contains(v));
    let (op1, v1) = (Operator::parse(&x.0), &x.1);
    let (op2, v2) = (Operator::parse(&y.0), &y.1);
    use Operator::*;
    match (op1, op2) {
        (Some(In), Some(Exists)) => true,
        (Some(In), Some(In)) => v2.iter().any(|v| v1.contains(v)),
        (Some(In), Some(NotIn)) => !contains_all(v2, v1),
        (Some(Exists), Some(In | NotIn | Exists)) => true,
        (Some(NotIn), Some(Exists | DoesNotExist | NotIn)) => true,
        (Some(NotIn), Some(In)) => !contains_all(v1, v2),
        (Some(DoesNotExist), Some(DoesNotExist | NotIn)) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(key: &str, op: &str, values: Option<&[&str]>) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.map(|v| v.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn sel(labels: &[(&str, &str)], exprs: Vec<LabelSelectorRequirement>) -> LabelSelector {
        LabelSelector {
            match_labels: (!labels.is_empty()).then(|| {
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            match_expressions: (!exprs.is_empty()).then_some(exprs),
        }
    }

    #[test]
    fn matching_table() {
        let labels: BTreeMap<String, String> = [("app", "web"), ("tier", "1")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let cases: Vec<(LabelSelector, bool)> = vec![
            (LabelSelector::default(), true),
            (sel(&[("app", "web")], vec![]), true),
            (sel(&[("app", "db")], vec![]), false),
            (sel(&[("app", "web"), ("zone", "a")], vec![]), false),
            (sel(&[], vec![expr("tier", "In", Some(&["1", "2"]))]), true),
            (sel(&[], vec![expr("tier", "In", Some(&["3"]))]), false),
            (sel(&[], vec![expr("zone", "In", Some(&["a"]))]), false),
            (sel(&[], vec![expr("tier", "NotIn", Some(&["1"]))]), false),
            (sel(&[], vec![expr("tier", "NotIn", Some(&["2"]))]), true),
            (sel(&[], vec![expr("zone", "NotIn", Some(&["a"]))]), true),
            (sel(&[], vec![expr("app", "Exists", None)]), true),
            (sel(&[], vec![expr("zone", "Exists", None)]), false),
            (sel(&[], vec![expr("zone", "DoesNotExist", None)]), true),
            (sel(&[], vec![expr("app", "DoesNotExist", None)]), false),
            (sel(&[], vec![expr("app", "Bogus", None)]), false),
            (
                sel(
                    &[("app", "web")],
                    vec![
                        expr("app", "Exists", None),
                        expr("tier", "In", Some(&["1"])),
                    ],
                ),
                true,
            ),
            (
                sel(
                    &[("app", "web")],
                    vec![expr("app", "Exists", None), expr("x", "Bogus", None)],
                ),
                false,
            ),
        ];
        for (s, want) in cases {
            assert_eq!(matches(&s, &labels), want, "{s:?}");
        }
    }

    #[test]
    fn violations_table() {
        let cases: [(&str, &str, usize, Vec<Violation>); 8] = [
            ("a", "In", 1, vec![]),
            ("a", "NotIn", 2, vec![]),
            ("a", "Exists", 0, vec![]),
            ("a", "In", 0, vec![Violation::ValuesRequired]),
            ("a", "NotIn", 0, vec![Violation::ValuesRequired]),
            ("a", "DoesNotExist", 1, vec![Violation::ValuesForbidden]),
            ("a", "Is", 1, vec![Violation::InvalidOperator("Is".into())]),
            (
                "",
                "",
                0,
                vec![
                    Violation::KeyRequired,
                    Violation::InvalidOperator(String::new()),
                ],
            ),
        ];
        for (key, op, n, want) in cases {
            assert_eq!(requirement_violations(key, op, n), want, "{key} {op} {n}");
        }
        let s = sel(
            &[],
            vec![
                expr("a", "In", Some(&["x"])),
                expr("b", "Exists", Some(&["x"])),
            ],
        );
        assert_eq!(violations(&s), vec![(1, Violation::ValuesForbidden)]);
    }

    #[test]
    fn selector_string_table() {
        let cases: Vec<(LabelSelector, Option<&str>)> = vec![
            (LabelSelector::default(), Some("")),
            (sel(&[("app", "web")], vec![]), Some("app=web")),
            (
                sel(&[("tier", "1"), ("app", "web")], vec![]),
                Some("app=web,tier=1"),
            ),
            (
                sel(
                    &[("zone", "a")],
                    vec![
                        expr("tier", "In", Some(&["2", "1"])),
                        expr("env", "NotIn", Some(&["prod"])),
                        expr("app", "Exists", None),
                        expr("old", "DoesNotExist", None),
                    ],
                ),
                Some("app,env notin (prod),!old,tier in (1,2),zone=a"),
            ),
            (sel(&[], vec![expr("a", "Bogus", None)]), None),
        ];
        for (s, want) in cases {
            assert_eq!(to_selector_string(&s).as_deref(), want, "{s:?}");
        }
    }

    #[test]
    fn emptiness() {
        assert!(is_empty(&LabelSelector::default()));
        assert!(is_empty(&LabelSelector {
            match_labels: Some(BTreeMap::new()),
            match_expressions: Some(vec![]),
        }));
        assert!(!is_empty(&sel(&[("a", "b")], vec![])));
        assert!(!is_empty(&sel(&[], vec![expr("a", "Exists", None)])));
    }

    #[test]
    fn loose_overlap_follows_upstream() {
        let sel = |labels: &[(&str, &str)]| LabelSelector {
            match_labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            match_expressions: None,
        };
        assert!(loose_overlap(&sel(&[("app", "a")]), &sel(&[("app", "a")])));
        assert!(!loose_overlap(&sel(&[("app", "a")]), &sel(&[("app", "b")])));
        // A key only one constrains: not a loose overlap (upstream lets both exist).
        assert!(!loose_overlap(
            &sel(&[("app", "a")]),
            &sel(&[("app", "a"), ("tier", "x")])
        ));
        let exists = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "app".into(),
                operator: "Exists".into(),
                values: None,
            }]),
        };
        assert!(loose_overlap(&sel(&[("app", "a")]), &exists));
    }
}
