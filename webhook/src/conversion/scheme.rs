//! Lossless conversion between two versions of a kind.
//!
//! Each kind supplies a plain mapping in both directions (upstream's behaviour) and the list of
//! places that mapping reads or writes ("owned" parts); everything else is copied verbatim.
//! When the plain mapping alone would not round-trip, the source's owned parts are kept in the
//! annotation [`keys::CLONESET_CONVERSION_ANNOTATION`] with a fingerprint of the owned parts we
//! produced. Converting back restores them only while that fingerprint still matches, so an edit
//! made in the other version always wins over the record.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use kruise_api::keys;

/// One direction of a plain mapping: the fields only; the scheme sets `apiVersion` after it.
pub type Mapping = fn(&Value) -> Value;

/// A place the plain mapping reads or writes.
#[derive(Debug, Clone, Copy)]
pub enum Owned {
    /// The value at this path (or its absence).
    Value(&'static [&'static str]),
    /// Only whether the object at this path exists (the mapping may create or empty it).
    Shape(&'static [&'static str]),
}

/// How one kind converts between its two versions.
#[derive(Debug, Clone, Copy)]
pub struct Scheme {
    /// `group/` prefix of apiVersion, e.g. `apps.kruise.io/`.
    pub group_prefix: &'static str,
    /// The two versions, e.g. `["v1alpha1", "v1beta1"]`.
    pub versions: [&'static str; 2],
    /// `versions[0]` → `versions[1]`.
    pub forward: Mapping,
    /// `versions[1]` → `versions[0]`.
    pub backward: Mapping,
    /// Places either mapping touches.
    pub owned: &'static [Owned],
}

const RECORD: &str = keys::CLONESET_CONVERSION_ANNOTATION;

impl Scheme {
    /// An apps.kruise.io kind served as v1alpha1 and v1beta1.
    pub const fn apps(forward: Mapping, backward: Mapping, owned: &'static [Owned]) -> Self {
        Self::alpha_beta(keys::APPS_GROUP_PREFIX, forward, backward, owned)
    }

    /// A policy.kruise.io kind served as v1alpha1 and v1beta1.
    pub const fn policy(forward: Mapping, backward: Mapping, owned: &'static [Owned]) -> Self {
        Self::alpha_beta(keys::POLICY_GROUP_PREFIX, forward, backward, owned)
    }

    const fn alpha_beta(
        group_prefix: &'static str,
        forward: Mapping,
        backward: Mapping,
        owned: &'static [Owned],
    ) -> Self {
        Self {
            group_prefix,
            versions: [keys::VERSION_V1ALPHA1, keys::VERSION_V1BETA1],
            forward,
            backward,
            owned,
        }
    }

    /// Converts `obj` to `desired` (`version` or `group/version`).
    pub fn convert(&self, obj: &Value, desired: &str) -> Result<Value, String> {
        let desired = desired.strip_prefix(self.group_prefix).unwrap_or(desired);
        let Some(to_idx) = self.versions.iter().position(|v| *v == desired) else {
            return Err(format!("cannot convert to unknown version {desired:?}"));
        };
        let Some(map) = obj.as_object() else {
            return Err("object to convert is not a JSON object".to_owned());
        };
        let api_version = map
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let from = api_version
            .strip_prefix(self.group_prefix)
            .filter(|v| self.versions.contains(v))
            .ok_or_else(|| format!("cannot convert from apiVersion {api_version:?}"))?;
        if !matches!(map.get("metadata"), None | Some(Value::Object(_))) {
            return Err("metadata is not an object".to_owned());
        }
        if from == desired {
            return Ok(obj.clone());
        }
        if let Some(restored) = self.restore(obj, desired) {
            return Ok(restored);
        }
        let mut source = obj.clone();
        remove_record(&mut source);
        let mut out = self.plain(&source, to_idx);
        if self.parts(&self.plain(&out, 1 - to_idx), false) != self.parts(&source, false) {
            let record = json!({
                "from": from,
                "parts": self.parts(&source, false),
                "fingerprint": fingerprint(&self.parts(&out, true)),
            });
            set_record(&mut out, record.to_string());
        }
        Ok(out)
    }

    fn restore(&self, obj: &Value, desired: &str) -> Option<Value> {
        let raw = obj
            .get("metadata")?
            .get("annotations")?
            .get(RECORD)?
            .as_str()?;
        let record: Value = serde_json::from_str(raw).ok()?;
        if record.get("from")?.as_str()? != desired {
            return None;
        }
        let mut current = obj.clone();
        remove_record(&mut current);
        if record.get("fingerprint")?.as_str()? != fingerprint(&self.parts(&current, true)) {
            return None;
        }
        let parts = record.get("parts")?.as_array()?;
        if parts.len() != self.owned.len() {
            return None;
        }
        // Values first, then shapes, so an emptied parent can be dropped.
        for (o, p) in self.owned.iter().zip(parts) {
            if let Owned::Value(path) = o {
                match p.get("v") {
                    Some(v) => set_at(&mut current, path, v.clone())?,
                    None => remove_at(&mut current, path),
                }
            }
        }
        for (o, p) in self.owned.iter().zip(parts) {
            if let Owned::Shape(path) = o {
                apply_shape(&mut current, path, p);
            }
        }
        current.as_object()?;
        self.set_api_version(&mut current, desired);
        Some(current)
    }

    /// The plain mapping to `versions[1]`, apiVersion set: upstream's conversion, no record.
    pub fn plain_forward(&self, obj: &Value) -> Value {
        self.plain(obj, 1)
    }

    /// The plain mapping to `versions[0]`, apiVersion set: upstream's conversion, no record.
    pub fn plain_backward(&self, obj: &Value) -> Value {
        self.plain(obj, 0)
    }

    fn plain(&self, obj: &Value, to_idx: usize) -> Value {
        let map = if to_idx == 1 {
            self.forward
        } else {
            self.backward
        };
        let mut out = map(obj);
        self.set_api_version(&mut out, self.versions[to_idx]);
        out
    }

    /// The one place a converted object's apiVersion is written.
    fn set_api_version(&self, obj: &mut Value, version: &str) {
        if let Some(o) = obj.as_object_mut() {
            o.insert(
                "apiVersion".to_owned(),
                json!(format!("{}{version}", self.group_prefix)),
            );
        }
    }

    /// Owned parts of `obj`, in `owned` order. For a fingerprint, an empty object (ignoring
    /// our record) counts as absent, since adding and removing the record may leave one.
    fn parts(&self, obj: &Value, for_fingerprint: bool) -> Value {
        let entries = self.owned.iter().map(|o| match o {
            Owned::Value(path) => match get_at(obj, path) {
                Some(v) => json!({"v": v}),
                None => json!({}),
            },
            Owned::Shape(path) => match get_at(obj, path) {
                None => json!("absent"),
                Some(Value::Object(m))
                    if for_fingerprint && m.keys().all(|k| k.as_str() == RECORD) =>
                {
                    json!("absent")
                }
                Some(Value::Object(_)) => json!("object"),
                Some(other) => json!({"v": other}),
            },
        });
        Value::Array(entries.collect())
    }
}

fn apply_shape(obj: &mut Value, path: &[&str], shape: &Value) {
    let current = get_at(obj, path);
    let empty = current.is_none_or(|v| v.as_object().is_some_and(Map::is_empty));
    match shape {
        Value::String(s) if s == "absent" => {
            if current.is_some() && empty {
                remove_at(obj, path);
            }
        }
        Value::String(s) if s == "object" => {
            if current.is_none_or(|v| !v.is_object()) {
                let _ = set_at(obj, path, json!({}));
            }
        }
        other => {
            if let Some(v) = other.get("v")
                && empty
            {
                let _ = set_at(obj, path, v.clone());
            }
        }
    }
}

/// `obj[path…]` through objects.
pub fn get_at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |cur, k| cur.as_object()?.get(*k))
}

/// Sets `obj[path…] = v`, creating missing (or null) parents as objects.
fn set_at(obj: &mut Value, path: &[&str], v: Value) -> Option<()> {
    let (last, parents) = path.split_last()?;
    let mut cur = obj;
    for k in parents {
        let m = cur.as_object_mut()?;
        let e = m.entry((*k).to_owned()).or_insert_with(|| json!({}));
        if e.is_null() {
            *e = json!({});
        }
        cur = e;
    }
    cur.as_object_mut()?.insert((*last).to_owned(), v);
    Some(())
}

fn remove_at(obj: &mut Value, path: &[&str]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for k in parents {
        match cur.as_object_mut().and_then(|m| m.get_mut(*k)) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(*last);
    }
}

/// SHA-256 over key-sorted JSON, so the fingerprint does not depend on map ordering.
fn fingerprint(v: &Value) -> String {
    let mut h = Sha256::new();
    h.update(canonical(v).as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&m[k])))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(a) => {
            let inner: Vec<String> = a.iter().map(canonical).collect();
            format!("[{}]", inner.join(","))
        }
        other => other.to_string(),
    }
}

fn set_record(obj: &mut Value, value: String) {
    set_annotation(obj, RECORD, value);
}

fn remove_record(obj: &mut Value) {
    // An emptied map stays: whether it existed is the object's business, not ours.
    remove_at(obj, &["metadata", "annotations", RECORD]);
}

/// Sets an annotation, creating the map (replacing a non-object one).
pub fn set_annotation(obj: &mut Value, key: &str, value: String) {
    set_in_map(obj, "annotations", key, value);
}

/// Sets a label, creating the map (replacing a non-object one).
pub fn set_label(obj: &mut Value, key: &str, value: String) {
    set_in_map(obj, "labels", key, value);
}

fn set_in_map(obj: &mut Value, map_key: &str, key: &str, value: String) {
    let Some(meta) = obj
        .as_object_mut()
        .map(|o| o.entry("metadata").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let m = meta.entry(map_key).or_insert_with(|| json!({}));
    if !m.is_object() {
        *m = json!({});
    }
    if let Some(m) = m.as_object_mut() {
        m.insert(key.to_owned(), Value::String(value));
    }
}
