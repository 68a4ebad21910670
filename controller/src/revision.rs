//! ControllerRevision history for workloads that keep their pod template in revisions, the way
//! Kubernetes' controller history and OpenKruise do it:
//!
//! - data: `{"spec":{"template":{…,"$patch":"replace"}}}` (a strategic merge patch that restores
//!   the template), serialized with sorted keys like Go's `encoding/json` does for maps;
//! - hash: FNV-32 of the data bytes, plus the decimal collision count when there is one, printed in
//!   decimal and mapped through the "safe" alphabet; name: `{parent}-{hash}`;
//! - an equal revision (same hash label, same data) is reused instead of creating a new one;
//! - revisions that no pod uses and that are neither current nor update are deleted oldest first
//!   beyond the history limit.
//!
//! Everything here is pure; the reconcile shell does the API calls.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kruise_api::keys::k8s::CONTROLLER_REVISION_HASH_KEY;
use serde_json::{Map, Value};

/// Pod-to-revision matching is a wire format shared with the CLI and other workloads, so it
/// lives in `kruise_api::revision`; re-exported for the callers of this module.
pub use kruise_api::revision::{equal_to_revision_hash, short_hash};

/// Longest parent-name prefix of a revision name, so that `{prefix}-{hash}` stays a valid name.
const MAX_PREFIX_LEN: usize = 223;

/// The characters Kubernetes uses for "safe" encodings (no vowels, no 0/1/3 look-alikes).
const SAFE_ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

#[derive(Debug, thiserror::Error)]
pub enum RevisionError {
    #[error("the workload has no pod template to record")]
    MissingTemplate,
    #[error("revision {0} has no data")]
    MissingData(String),
    #[error("revision {name} does not hold a pod template: {reason}")]
    BadData { name: String, reason: String },
    #[error("serializing revision data: {0}")]
    Serialize(#[from] serde_json::Error),
    #[error("the workload has no namespace or uid to own its revisions")]
    Unowned,
}

/// Who owns the revisions: the parent workload.
#[derive(Clone, Debug)]
pub struct Parent<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
    pub namespace: &'a str,
    pub uid: &'a str,
}

impl Parent<'_> {
    fn owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.to_string(),
            kind: self.kind.to_string(),
            name: self.name.to_string(),
            uid: self.uid.to_string(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
}

/// The revision patch for a pod template given as JSON.
pub fn revision_data(template: &Value) -> Result<Value, RevisionError> {
    let Value::Object(tpl) = template else {
        return Err(RevisionError::MissingTemplate);
    };
    let mut tpl = tpl.clone();
    go_like_template(&mut tpl);
    tpl.insert("$patch".to_string(), Value::String("replace".to_string()));
    let mut spec = Map::new();
    spec.insert("template".to_string(), Value::Object(tpl));
    let mut root = Map::new();
    root.insert("spec".to_string(), Value::Object(spec));
    Ok(Value::Object(root))
}

/// Upstream decodes the template into Go structs and encodes it again, which adds a few fields
/// that are never omitted. Adding them here keeps our data (and so our hashes) as close to
/// upstream's as cheaply possible.
fn go_like_template(tpl: &mut Map<String, Value>) {
    let meta = tpl
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.entry("creationTimestamp").or_insert(Value::Null);
    }
    if let Some(Value::Object(spec)) = tpl.get_mut("spec") {
        for list in ["initContainers", "containers"] {
            if let Some(Value::Array(cs)) = spec.get_mut(list) {
                for c in cs.iter_mut() {
                    if let Value::Object(c) = c {
                        c.entry("resources")
                            .or_insert_with(|| Value::Object(Map::new()));
                    }
                }
            }
        }
    }
}

/// Serializes JSON the way Go's `encoding/json` does for maps: sorted keys, compact, and with
/// `<`, `>`, `&`, U+2028 and U+2029 escaped.
pub fn go_json_bytes(v: &Value) -> Result<Vec<u8>, RevisionError> {
    // serde_json's Map is a BTreeMap here (no preserve_order), so keys come out sorted.
    let s = serde_json::to_string(v)?;
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    Ok(out.into_bytes())
}

/// FNV-1 32-bit, as Go's `hash/fnv.New32`.
fn fnv1_32(parts: &[&[u8]]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for part in parts {
        for b in part.iter() {
            h = h.wrapping_mul(0x0100_0193);
            h ^= u32::from(*b);
        }
    }
    h
}

/// Kubernetes' `rand.SafeEncodeString`.
fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| SAFE_ALPHANUMS[usize::from(b) % SAFE_ALPHANUMS.len()] as char)
        .collect()
}

/// The hash of revision data, with the collision count folded in when present.
pub fn hash_revision(data: &Value, collision_count: Option<i32>) -> Result<String, RevisionError> {
    let bytes = go_json_bytes(data)?;
    let probe = collision_count.map(|c| c.to_string());
    let h = match &probe {
        Some(p) => fnv1_32(&[&bytes, p.as_bytes()]),
        None => fnv1_32(&[&bytes]),
    };
    Ok(safe_encode(&h.to_string()))
}

/// `{parent}-{hash}`, with the parent name cut so the result is a valid object name.
pub fn revision_name(parent: &str, hash: &str) -> String {
    let mut end = parent.len().min(MAX_PREFIX_LEN);
    while !parent.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{}", &parent[..end], hash)
}

/// A new (not yet created) revision of `parent` for `template`.
pub fn new_revision(
    parent: &Parent<'_>,
    template: &Value,
    template_labels: &BTreeMap<String, String>,
    parent_annotations: &BTreeMap<String, String>,
    revision: i64,
    collision_count: i32,
) -> Result<ControllerRevision, RevisionError> {
    let data = revision_data(template)?;
    let hash = hash_revision(&data, Some(collision_count))?;
    let mut labels = template_labels.clone();
    labels.insert(CONTROLLER_REVISION_HASH_KEY.to_string(), hash.clone());
    Ok(ControllerRevision {
        metadata: ObjectMeta {
            name: Some(revision_name(parent.name, &hash)),
            namespace: Some(parent.namespace.to_string()),
            labels: Some(labels),
            annotations: (!parent_annotations.is_empty()).then(|| parent_annotations.clone()),
            owner_references: Some(vec![parent.owner_reference()]),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision,
    })
}

/// The name a revision gets when created with `collision_count`; the create loop calls this again
/// with a bumped count when the name is taken by a revision with different data.
pub fn name_for_collision(
    parent: &str,
    rev: &ControllerRevision,
    collision_count: i32,
) -> Result<String, RevisionError> {
    let data =
        rev.data.as_ref().map(|d| &d.0).ok_or_else(|| {
            RevisionError::MissingData(rev.metadata.name.clone().unwrap_or_default())
        })?;
    Ok(revision_name(
        parent,
        &hash_revision(data, Some(collision_count))?,
    ))
}

fn hash_label(rev: &ControllerRevision) -> Option<&str> {
    rev.metadata
        .labels
        .as_ref()?
        .get(CONTROLLER_REVISION_HASH_KEY)
        .map(String::as_str)
}

/// Kubernetes' `EqualRevision`: hash labels, when both present, must match, then the data.
pub fn equal_revision(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    if let (Some(ha), Some(hb)) = (hash_label(a), hash_label(b))
        && ha != hb
    {
        return false;
    }
    a.data.as_ref().map(|d| &d.0) == b.data.as_ref().map(|d| &d.0)
}

/// Indexes of the revisions in `revisions` equal to `needle`, in order.
pub fn find_equal_revisions(
    revisions: &[ControllerRevision],
    needle: &ControllerRevision,
) -> Vec<usize> {
    revisions
        .iter()
        .enumerate()
        .filter(|(_, r)| equal_revision(r, needle))
        .map(|(i, _)| i)
        .collect()
}

/// Sort by revision number, then creation time, then name (Kubernetes' order).
pub fn sort_revisions(revisions: &mut [ControllerRevision]) {
    revisions.sort_by(|a, b| {
        a.revision
            .cmp(&b.revision)
            .then_with(|| {
                let ta = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
                let tb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
                ta.cmp(&tb)
            })
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

/// The revision number after the newest of sorted `revisions`.
pub fn next_revision_number(revisions: &[ControllerRevision]) -> i64 {
    revisions.last().map_or(1, |r| r.revision + 1)
}

/// What to do with the freshly computed update revision.
#[derive(Clone, Debug, PartialEq)]
pub enum UpdateRevisionChoice {
    /// The newest existing revision is already equal: use it (index into revisions).
    UseExisting(usize),
    /// An older revision is equal (a rollback): bump its revision number to `new_number`.
    Bump { index: usize, new_number: i64 },
    /// Nothing equal exists: create the new revision.
    Create,
}

/// Whether `a` and `b` record the same template, however each was encoded. Go clients built on
/// apimachinery before 0.34 (OpenKruise v1.9, whose hashes this crate keeps) write the template's
/// `metadata.creationTimestamp: null` and containers' empty `resources`; Kubernetes 1.34's own
/// controllers omit them, so a StatefulSet's revision has another hash (and hash label) for the
/// same template. Hash labels are therefore not compared.
pub fn same_template(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    match (&a.data, &b.data) {
        (Some(x), Some(y)) => without_empty_fields(&x.0) == without_empty_fields(&y.0),
        _ => false,
    }
}

/// Revision data without the fields whose presence depends only on the encoder.
fn without_empty_fields(data: &Value) -> Value {
    let mut out = data.clone();
    let Some(tpl) = out
        .get_mut("spec")
        .and_then(|s| s.get_mut("template"))
        .and_then(Value::as_object_mut)
    else {
        return out;
    };
    if let Some(Value::Object(meta)) = tpl.get_mut("metadata")
        && meta.get("creationTimestamp").is_some_and(Value::is_null)
    {
        meta.remove("creationTimestamp");
    }
    if let Some(Value::Object(spec)) = tpl.get_mut("spec") {
        for list in ["initContainers", "containers"] {
            if let Some(Value::Array(cs)) = spec.get_mut(list) {
                for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                    if c.get("resources")
                        .and_then(Value::as_object)
                        .is_some_and(Map::is_empty)
                    {
                        c.remove("resources");
                    }
                }
            }
        }
    }
    out
}

/// Decide between reusing, bumping or creating, given sorted `revisions`. A revision equal as
/// Kubernetes compares them wins; failing that, one that records the same template in another
/// encoding (see [`same_template`]: an adopted StatefulSet revision), so its Pods are not
/// recreated for a difference in how a field that is absent was written.
pub fn choose_update_revision(
    revisions: &[ControllerRevision],
    candidate: &ControllerRevision,
) -> UpdateRevisionChoice {
    let mut equal = find_equal_revisions(revisions, candidate);
    if equal.is_empty() {
        equal = (0..revisions.len())
            .filter(|&i| same_template(&revisions[i], candidate))
            .collect();
    }
    match equal.last() {
        Some(&last) if last + 1 == revisions.len() => UpdateRevisionChoice::UseExisting(last),
        Some(&last) => UpdateRevisionChoice::Bump {
            index: last,
            new_number: candidate.revision,
        },
        None => UpdateRevisionChoice::Create,
    }
}

/// Names of revisions to delete so that at most `limit` non-live revisions remain. Live: the
/// current and update revisions and any revision a pod still uses. `revisions` must be sorted.
pub fn revisions_to_truncate(
    revisions: &[ControllerRevision],
    live_pod_hashes: &BTreeSet<String>,
    current: &str,
    update: &str,
    limit: i32,
) -> Vec<String> {
    let pod_uses = |name: &str| {
        live_pod_hashes
            .iter()
            .any(|h| equal_to_revision_hash(Some(h), name))
    };
    let non_live: Vec<String> = revisions
        .iter()
        .filter_map(|r| r.metadata.name.clone())
        .filter(|n| n != current && n != update && !pod_uses(n))
        .collect();
    let limit = usize::try_from(limit.max(0)).unwrap_or(0);
    if non_live.len() <= limit {
        return Vec::new();
    }
    non_live[..non_live.len() - limit].to_vec()
}

/// The pod template recorded in a revision (the inverse of [`revision_data`]).
pub fn template_from_revision(rev: &ControllerRevision) -> Result<Value, RevisionError> {
    let name = rev.metadata.name.clone().unwrap_or_default();
    let data = rev
        .data
        .as_ref()
        .ok_or_else(|| RevisionError::MissingData(name.clone()))?;
    let tpl = data
        .0
        .get("spec")
        .and_then(|s| s.get("template"))
        .ok_or_else(|| RevisionError::BadData {
            name: name.clone(),
            reason: "no spec.template".to_string(),
        })?;
    let Value::Object(tpl) = tpl else {
        return Err(RevisionError::BadData {
            name,
            reason: "spec.template is not an object".to_string(),
        });
    };
    let mut tpl = tpl.clone();
    tpl.remove("$patch");
    Ok(Value::Object(tpl))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parent() -> Parent<'static> {
        Parent {
            api_version: "apps.kruise.io/v1beta1",
            kind: "CloneSet",
            name: "demo",
            namespace: "ns",
            uid: "uid-1",
        }
    }

    fn tpl(image: &str) -> Value {
        json!({"metadata":{"labels":{"app":"demo"}},"spec":{"containers":[{"name":"main","image":image}]}})
    }

    fn rev(image: &str, number: i64) -> ControllerRevision {
        new_revision(
            &parent(),
            &tpl(image),
            &BTreeMap::new(),
            &BTreeMap::new(),
            number,
            0,
        )
        .expect("revision")
    }

    /// A template as Kubernetes 1.34 returns a StatefulSet's, and the ControllerRevision its
    /// StatefulSet controller made of it (read from a cluster): same template, another encoding.
    fn native_statefulset_revision() -> (Value, ControllerRevision) {
        let template = json!({"metadata": {"annotations": {"note": "a<b & c>d"}, "labels": {"app": "db"}}, "spec": {"containers": [{"env": [{"name": "A", "value": "1"}], "image": "registry.local/testapp:v1", "imagePullPolicy": "IfNotPresent", "name": "app", "ports": [{"containerPort": 8080, "protocol": "TCP"}], "readinessProbe": {"failureThreshold": 3, "httpGet": {"path": "/", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 1, "successThreshold": 1, "timeoutSeconds": 1}, "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}, "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}], "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler", "securityContext": {}, "terminationGracePeriodSeconds": 1}});
        let mut data = template.clone();
        data["$patch"] = json!("replace");
        let rev = ControllerRevision {
            metadata: ObjectMeta {
                name: Some("db-86779d475d".into()),
                labels: Some(BTreeMap::from([
                    ("app".to_string(), "db".to_string()),
                    (
                        CONTROLLER_REVISION_HASH_KEY.to_string(),
                        "86779d475d".to_string(),
                    ),
                ])),
                ..Default::default()
            },
            data: Some(RawExtension(json!({"spec": {"template": data}}))),
            revision: 1,
        };
        (template, rev)
    }

    /// The StatefulSet controller of Kubernetes 1.34 hashes the data it wrote; ours adds
    /// `creationTimestamp: null` as OpenKruise v1.9 does, so the names differ, yet the adopted
    /// revision is recognised as the same template and reused.
    #[test]
    fn an_adopted_statefulset_revision_of_the_same_template_is_reused() {
        let (template, native) = native_statefulset_revision();
        let native_data = &native.data.as_ref().expect("data").0;
        assert_eq!(
            hash_revision(native_data, Some(0)).expect("hash"),
            "86779d475d",
            "Kubernetes' own hash of its own data"
        );
        // As the controller reads it: through the typed template.
        let typed: k8s_openapi::api::core::v1::PodTemplateSpec =
            serde_json::from_value(template.clone()).expect("template");
        let template = serde_json::to_value(&typed).expect("json");
        let ours = new_revision(
            &parent(),
            &template,
            &BTreeMap::new(),
            &BTreeMap::new(),
            2,
            0,
        )
        .expect("revision");
        assert!(
            !equal_revision(&native, &ours),
            "another encoding, another hash"
        );
        assert!(same_template(&native, &ours));
        assert_eq!(
            choose_update_revision(std::slice::from_ref(&native), &ours),
            UpdateRevisionChoice::UseExisting(0)
        );
        // A real change is still a new revision.
        let mut changed = template.clone();
        changed["spec"]["containers"][0]["image"] = json!("registry.local/testapp:v2");
        let other = new_revision(
            &parent(),
            &changed,
            &BTreeMap::new(),
            &BTreeMap::new(),
            2,
            0,
        )
        .expect("revision");
        assert!(!same_template(&native, &other));
        assert_eq!(
            choose_update_revision(&[native], &other),
            UpdateRevisionChoice::Create
        );
    }

    #[test]
    fn fnv1_matches_go_reference_values() {
        // Values of Go's hash/fnv New32 (FNV-1, not 1a).
        assert_eq!(fnv1_32(&[b""]), 0x811c_9dc5);
        assert_eq!(fnv1_32(&[b"a"]), 0x050c_5d7e);
        assert_eq!(fnv1_32(&[b"foobar"]), 0x31f0_b262);
        assert_eq!(fnv1_32(&[b"foo", b"bar"]), fnv1_32(&[b"foobar"]));
    }

    #[test]
    fn safe_encode_maps_digits() {
        // '0' is 48: 48 % 27 = 21 -> '4'; '9' is 57: 57 % 27 = 3 -> 'f'.
        assert_eq!(safe_encode("0"), "4");
        assert_eq!(safe_encode("9"), "f");
        assert_eq!(safe_encode("10"), "54");
    }

    #[test]
    fn data_shape_is_a_replace_patch_with_sorted_keys() {
        let data = revision_data(&tpl("nginx:1")).expect("data");
        let bytes = String::from_utf8(go_json_bytes(&data).expect("bytes")).expect("utf8");
        assert_eq!(
            bytes,
            r#"{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"demo"}},"spec":{"containers":[{"image":"nginx:1","name":"main","resources":{}}]}}}}"#
        );
    }

    #[test]
    fn go_json_escapes_html() {
        let b = go_json_bytes(&json!({"a":"<&>"})).expect("bytes");
        assert_eq!(
            String::from_utf8(b).expect("utf8"),
            r#"{"a":"\u003c\u0026\u003e"}"#
        );
    }

    #[test]
    fn name_and_hash_label() {
        let r = rev("nginx:1", 1);
        let hash =
            r.metadata.labels.as_ref().expect("labels")[CONTROLLER_REVISION_HASH_KEY].clone();
        assert_eq!(
            r.metadata.name.as_deref(),
            Some(format!("demo-{hash}").as_str())
        );
        assert!(hash.bytes().all(|b| SAFE_ALPHANUMS.contains(&b)));
        let owner = &r.metadata.owner_references.as_ref().expect("owners")[0];
        assert_eq!(owner.controller, Some(true));
        assert_eq!(owner.uid, "uid-1");
    }

    #[test]
    fn collision_count_changes_the_name() {
        let r = rev("nginx:1", 1);
        let n0 = name_for_collision("demo", &r, 0).expect("n0");
        let n1 = name_for_collision("demo", &r, 1).expect("n1");
        assert_eq!(Some(n0.as_str()), r.metadata.name.as_deref());
        assert_ne!(n0, n1);
    }

    #[test]
    fn hash_is_deterministic_and_template_sensitive() {
        assert_eq!(rev("a", 1).metadata.name, rev("a", 5).metadata.name);
        assert_ne!(rev("a", 1).metadata.name, rev("b", 1).metadata.name);
    }

    #[test]
    fn long_parent_names_are_cut() {
        let long = "x".repeat(300);
        assert_eq!(revision_name(&long, "abc").len(), MAX_PREFIX_LEN + 4);
    }

    #[test]
    fn short_hash_and_equality() {
        assert_eq!(short_hash("demo-abc12"), "abc12");
        assert_eq!(short_hash("abc12"), "abc12");
        assert!(equal_to_revision_hash(Some("demo-abc"), "demo-abc"));
        assert!(equal_to_revision_hash(Some("abc"), "demo-abc"));
        assert!(!equal_to_revision_hash(Some("demo-abd"), "demo-abc"));
        assert!(!equal_to_revision_hash(None, "demo-abc"));
    }

    #[test]
    fn choose_reuses_bumps_or_creates() {
        let mut revs = vec![rev("a", 1), rev("b", 2)];
        sort_revisions(&mut revs);
        let mut cand = rev("b", 3);
        assert_eq!(
            choose_update_revision(&revs, &cand),
            UpdateRevisionChoice::UseExisting(1)
        );
        cand = rev("a", 3);
        assert_eq!(
            choose_update_revision(&revs, &cand),
            UpdateRevisionChoice::Bump {
                index: 0,
                new_number: 3
            }
        );
        cand = rev("c", 3);
        assert_eq!(
            choose_update_revision(&revs, &cand),
            UpdateRevisionChoice::Create
        );
    }

    #[test]
    fn equal_revision_respects_hash_label() {
        let a = rev("a", 1);
        let mut b = a.clone();
        assert!(equal_revision(&a, &b));
        b.metadata
            .labels
            .as_mut()
            .expect("labels")
            .insert(CONTROLLER_REVISION_HASH_KEY.into(), "other".into());
        assert!(!equal_revision(&a, &b));
    }

    #[test]
    fn template_round_trip() {
        let r = rev("a", 1);
        let t = template_from_revision(&r).expect("template");
        assert_eq!(t["spec"]["containers"][0]["image"], "a");
        assert!(t.get("$patch").is_none());
    }

    #[test]
    fn truncation_keeps_live_and_limit() {
        let mut revs: Vec<ControllerRevision> =
            (1..=6).map(|i| rev(&format!("img{i}"), i)).collect();
        sort_revisions(&mut revs);
        let names: Vec<String> = revs
            .iter()
            .map(|r| r.metadata.name.clone().expect("name"))
            .collect();
        let mut live = BTreeSet::new();
        live.insert(short_hash(&names[1]).to_string());
        // current = 6th, update = 5th, pod uses 2nd: non-live are 1st, 3rd, 4th.
        let del = revisions_to_truncate(&revs, &live, &names[5], &names[4], 1);
        assert_eq!(del, vec![names[0].clone(), names[2].clone()]);
        assert!(revisions_to_truncate(&revs, &live, &names[5], &names[4], 10).is_empty());
        let all = revisions_to_truncate(&revs, &BTreeSet::new(), &names[5], &names[5], 0);
        assert_eq!(all.len(), 5);
    }

    #[test]
    fn next_number() {
        assert_eq!(next_revision_number(&[]), 1);
        assert_eq!(next_revision_number(&[rev("a", 4)]), 5);
    }
}
