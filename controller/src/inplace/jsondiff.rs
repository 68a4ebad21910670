//! A structural JSON diff (RFC 6902 style operations) used to decide what changed between two
//! revision templates. Paths are kept as segments so the rules can match them without regexes.

use serde_json::{Map, Value};
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpKind {
    Add,
    Remove,
    Replace,
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpKind::Add => "add",
            OpKind::Remove => "remove",
            OpKind::Replace => "replace",
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Op {
    pub kind: OpKind,
    pub path: Vec<Seg>,
    /// The new value (absent for `remove`).
    pub value: Option<Value>,
}

/// Drops nulls and empty objects/arrays held by object keys, recursively: they mean the same as
/// an absent field, and revisions written by another serializer (Go's emits `resources: {}`,
/// `creationTimestamp: null`) must not look different because of them.
pub(crate) fn normalize(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let v = normalize(v);
                let empty = match &v {
                    Value::Null => true,
                    Value::Object(m) => m.is_empty(),
                    Value::Array(a) => a.is_empty(),
                    _ => false,
                };
                if !empty {
                    out.insert(k.clone(), v);
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(normalize).collect()),
        other => other.clone(),
    }
}

/// The operations turning `old` into `new`. Arrays of equal length are compared element by
/// element; otherwise the common prefix is compared and the tail added or removed.
pub(crate) fn diff(old: &Value, new: &Value) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut path = Vec::new();
    diff_into(old, new, &mut path, &mut ops);
    ops
}

fn diff_into(old: &Value, new: &Value, path: &mut Vec<Seg>, ops: &mut Vec<Op>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                path.push(Seg::Key(k.clone()));
                match b.get(k) {
                    Some(vb) => diff_into(va, vb, path, ops),
                    None => ops.push(Op {
                        kind: OpKind::Remove,
                        path: path.clone(),
                        value: None,
                    }),
                }
                path.pop();
            }
            for (k, vb) in b {
                if !a.contains_key(k) {
                    path.push(Seg::Key(k.clone()));
                    ops.push(Op {
                        kind: OpKind::Add,
                        path: path.clone(),
                        value: Some(vb.clone()),
                    });
                    path.pop();
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            let common = a.len().min(b.len());
            for i in 0..common {
                path.push(Seg::Index(i));
                diff_into(&a[i], &b[i], path, ops);
                path.pop();
            }
            // Remove from the end so every index stays valid while applying.
            for i in (common..a.len()).rev() {
                path.push(Seg::Index(i));
                ops.push(Op {
                    kind: OpKind::Remove,
                    path: path.clone(),
                    value: None,
                });
                path.pop();
            }
            for (i, item) in b.iter().enumerate().skip(common) {
                path.push(Seg::Index(i));
                ops.push(Op {
                    kind: OpKind::Add,
                    path: path.clone(),
                    value: Some(item.clone()),
                });
                path.pop();
            }
        }
        (a, b) if a == b => {}
        (_, b) => ops.push(Op {
            kind: OpKind::Replace,
            path: path.clone(),
            value: Some(b.clone()),
        }),
    }
}

/// `spec.containers[0].image`: the path as a person would write it.
pub(crate) fn display_path(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

/// Applies operations produced by [`diff`]; used by tests to check the diff is faithful.
#[cfg(test)]
pub(crate) fn apply(doc: &mut Value, ops: &[Op]) {
    for op in ops {
        let (last, parent_path) = op.path.split_last().expect("non-root op");
        let mut parent = &mut *doc;
        for seg in parent_path {
            parent = match seg {
                Seg::Key(k) => parent.get_mut(k.as_str()).expect("parent key"),
                Seg::Index(i) => parent.get_mut(*i).expect("parent index"),
            };
        }
        match (last, parent) {
            (Seg::Key(k), Value::Object(m)) => match op.kind {
                OpKind::Remove => {
                    m.remove(k);
                }
                _ => {
                    m.insert(k.clone(), op.value.clone().expect("value"));
                }
            },
            (Seg::Index(i), Value::Array(a)) => match op.kind {
                OpKind::Remove => {
                    a.remove(*i);
                }
                OpKind::Add => a.insert(*i, op.value.clone().expect("value")),
                OpKind::Replace => a[*i] = op.value.clone().expect("value"),
            },
            _ => panic!("path does not match document"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn replaces_adds_and_removes() {
        let old = json!({"a": 1, "b": {"c": [1, 2, 3]}, "d": "x"});
        let new = json!({"a": 2, "b": {"c": [1, 5]}, "e": true});
        let ops = diff(&old, &new);
        let shown: Vec<String> = ops
            .iter()
            .map(|o| format!("{} {}", o.kind, display_path(&o.path)))
            .collect();
        assert_eq!(
            shown,
            vec![
                "replace a",
                "replace b.c[1]",
                "remove b.c[2]",
                "remove d",
                "add e"
            ]
        );
    }

    #[test]
    fn normalize_drops_empty_values() {
        let v = json!({"metadata": {"creationTimestamp": null, "labels": {"a": "b"}},
                       "spec": {"containers": [{"name": "c", "resources": {}, "env": []}]}});
        assert_eq!(
            normalize(&v),
            json!({"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}})
        );
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0i64..5).prop_map(|n| json!(n)),
            "[a-c]{0,2}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-d]", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn applying_the_diff_gives_the_new_document(
            old in prop::collection::btree_map("[a-d]", arb_json(), 0..4),
            new in prop::collection::btree_map("[a-d]", arb_json(), 0..4),
        ) {
            let old = Value::Object(old.into_iter().collect());
            let new = Value::Object(new.into_iter().collect());
            let mut doc = old.clone();
            apply(&mut doc, &diff(&old, &new));
            prop_assert_eq!(doc, new.clone());
            prop_assert!(diff(&new, &new).is_empty());
        }
    }
}
