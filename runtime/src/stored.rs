//! A kind read and written at the version the API server stores, while the code works on
//! another version of it (the served one it was written against).
//!
//! When the two differ, every watch event and write at the served version costs the API server
//! a call to the conversion webhook. [`Stored`] watches, reads and writes the stored version
//! instead and converts in this process, with the same conversion function the webhook runs,
//! so the objects the code sees are the ones the webhook would have returned: metadata
//! (resourceVersion, uid, generation, managedFields) is copied verbatim, so a write guarded by
//! the resourceVersion still conflicts (409) as it would at the served version.
//!
//! ```ignore
//! let stored: Stored<CloneSet> = Stored::new("v1alpha1", Some(convert));
//! let ctl = Controller::watching("cloneset", stored.watch(stored.api(client, None), cfg), …);
//! stored.api(client, Some(ns)).patch_status(name, &pp, &Patch::Merge(same_in_both_versions))
//! ```

use std::fmt::Debug;
use std::marker::PhantomData;

use futures::{Stream, StreamExt, future};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Converts one object (JSON, with its apiVersion) to the version `desired` (`group/version`).
pub type Convert = fn(&Value, &str) -> Result<Value, String>;

/// An object that could not be taken from one version to the other.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The conversion function refused it (or there is none for a kind that needs one).
    #[error("converting {kind} to {version}: {message}")]
    Convert {
        /// The kind.
        kind: String,
        /// The version asked for (`group/version`).
        version: String,
        /// What the conversion said.
        message: String,
    },
    /// The object does not (de)serialize as the type of its version.
    #[error("decoding {kind} at {version}: {source}")]
    Json {
        /// The kind.
        kind: String,
        /// The version it was decoded at.
        version: String,
        /// The decoder's error.
        source: serde_json::Error,
    },
}

/// How `K` (a served version) is read and written at the stored version.
pub struct Stored<K> {
    stored: ApiResource,
    served: ApiResource,
    convert: Option<Convert>,
    _served: PhantomData<fn() -> K>,
}

impl<K> Clone for Stored<K> {
    fn clone(&self) -> Self {
        Self {
            stored: self.stored.clone(),
            served: self.served.clone(),
            convert: self.convert,
            _served: PhantomData,
        }
    }
}

impl<K> Debug for Stored<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stored")
            .field("stored", &self.stored.api_version)
            .field("served", &self.served.api_version)
            .finish()
    }
}

impl<K> Stored<K>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug + Send + 'static,
{
    /// `K` stored at `version` (of `K`'s group); `convert` is the kind's conversion, needed
    /// only when `version` is not `K`'s own.
    pub fn new(version: &str, convert: Option<Convert>) -> Self {
        let served = ApiResource::erase::<K>(&());
        let gvk = GroupVersionKind::gvk(&served.group, version, &served.kind);
        let stored = ApiResource::from_gvk_with_plural(&gvk, &served.plural);
        Self {
            stored,
            served,
            convert,
            _served: PhantomData,
        }
    }

    /// The stored version's resource (for a dynamic API or a discovery-free lookup).
    pub fn resource(&self) -> &ApiResource {
        &self.stored
    }

    /// Whether objects are converted (the stored version is not `K`'s).
    pub fn converts(&self) -> bool {
        self.stored.version != self.served.version
    }

    /// The stored version's API over namespace `ns` (all namespaces when `None`).
    pub fn api(&self, client: Client, ns: Option<&str>) -> Api<DynamicObject> {
        match ns {
            Some(ns) => Api::namespaced_with(client, ns, &self.stored),
            None => Api::all_with(client, &self.stored),
        }
    }

    /// A stored-version object as `K`.
    pub fn served(&self, obj: &DynamicObject) -> Result<K, Error> {
        let value = self.encode(obj, &self.stored)?;
        let value = self.convert(&value, &self.served)?;
        self.decode(value, &self.served)
    }

    /// `K` as a stored-version object (for a replace or create at the stored version).
    pub fn stored(&self, obj: &K) -> Result<DynamicObject, Error> {
        let value = self.encode(obj, &self.served)?;
        let value = self.convert(&value, &self.stored)?;
        self.decode(value, &self.stored)
    }

    /// A watch of the stored version, each object converted to `K`, restarted with kube's
    /// default backoff. An object that does not convert is logged and left out (the webhook
    /// would have failed that watch event as well).
    pub fn watch(
        &self,
        api: Api<DynamicObject>,
        cfg: watcher::Config,
    ) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static {
        let this = self.clone();
        watcher(api, cfg)
            .default_backoff()
            .filter_map(move |ev| future::ready(this.event(ev)))
    }

    /// The writes that take the stored object from `before` to `after` (both `K`): a JSON
    /// merge patch of the object (metadata, spec) and one of its status subresource, each
    /// `None` when nothing changes there. A field that is a status field in `K` but metadata
    /// in the stored version (an annotation) lands in the object's patch, as the webhook would
    /// have put it.
    pub fn patches(&self, before: &K, after: &K) -> Result<Patches, Error> {
        let before = self.stored_value(before)?;
        let after = self.stored_value(after)?;
        let mut diff = match merge_diff(&before, &after) {
            Some(Value::Object(diff)) => diff,
            _ => return Ok(Patches::default()),
        };
        let status = diff
            .remove("status")
            .map(|s| serde_json::json!({ "status": s }));
        let object = (!diff.is_empty()).then_some(Value::Object(diff));
        Ok(Patches { object, status })
    }

    fn stored_value(&self, obj: &K) -> Result<Value, Error> {
        let value = self.encode(obj, &self.served)?;
        self.convert(&value, &self.stored)
    }

    fn event(
        &self,
        ev: Result<watcher::Event<DynamicObject>, watcher::Error>,
    ) -> Option<Result<watcher::Event<K>, watcher::Error>> {
        use watcher::Event;
        let ev = match ev {
            Err(e) => return Some(Err(e)),
            Ok(ev) => ev,
        };
        let one = |o: &DynamicObject| match self.served(o) {
            Ok(k) => Some(k),
            Err(e) => {
                tracing::warn!(
                    name = o.metadata.name.as_deref().unwrap_or_default(),
                    namespace = o.metadata.namespace.as_deref().unwrap_or_default(),
                    error = %e,
                    "left a stored object out of the watch"
                );
                None
            }
        };
        Some(Ok(match ev {
            Event::Apply(o) => Event::Apply(one(&o)?),
            Event::Delete(o) => Event::Delete(one(&o)?),
            Event::InitApply(o) => Event::InitApply(one(&o)?),
            Event::Init => Event::Init,
            Event::InitDone => Event::InitDone,
        }))
    }

    fn convert(&self, value: &Value, to: &ApiResource) -> Result<Value, Error> {
        if !self.converts() {
            return Ok(value.clone());
        }
        let err = |message: String| Error::Convert {
            kind: self.served.kind.clone(),
            version: to.api_version.clone(),
            message,
        };
        let convert = self
            .convert
            .ok_or_else(|| err("no conversion for this kind".to_owned()))?;
        convert(value, &to.api_version).map_err(err)
    }

    /// `obj` as JSON, its apiVersion and kind those of `at` (list items may come without them).
    fn encode(&self, obj: &impl Serialize, at: &ApiResource) -> Result<Value, Error> {
        let mut value = serde_json::to_value(obj).map_err(|source| Error::Json {
            kind: self.served.kind.clone(),
            version: at.api_version.clone(),
            source,
        })?;
        if let Some(map) = value.as_object_mut() {
            map.insert("apiVersion".to_owned(), at.api_version.clone().into());
            map.insert("kind".to_owned(), at.kind.clone().into());
        }
        Ok(value)
    }

    fn decode<T: DeserializeOwned>(&self, value: Value, at: &ApiResource) -> Result<T, Error> {
        serde_json::from_value(value).map_err(|source| Error::Json {
            kind: self.served.kind.clone(),
            version: at.api_version.clone(),
            source,
        })
    }
}

/// The merge patches of one change (see [`Stored::patches`]).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Patches {
    /// For the object itself (metadata and spec).
    pub object: Option<Value>,
    /// For the status subresource: `{"status": …}`.
    pub status: Option<Value>,
}

/// The JSON merge patch (RFC 7386) that turns `from` into `to`; `None` when they are equal.
/// Arrays are replaced whole, as a merge patch does.
pub fn merge_diff(from: &Value, to: &Value) -> Option<Value> {
    if from == to {
        return None;
    }
    let (Value::Object(f), Value::Object(t)) = (from, to) else {
        return Some(to.clone());
    };
    let mut out = serde_json::Map::new();
    for (k, fv) in f {
        match t.get(k) {
            None => {
                out.insert(k.clone(), Value::Null);
            }
            Some(tv) => {
                if let Some(d) = merge_diff(fv, tv) {
                    out.insert(k.clone(), d);
                }
            }
        }
    }
    for (k, tv) in t {
        if !f.contains_key(k) {
            out.insert(k.clone(), tv.clone());
        }
    }
    Some(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    /// Renames `data.x` ⇄ `data.y` between "v1" and "v2" of ConfigMap.
    fn rename(obj: &Value, desired: &str) -> Result<Value, String> {
        let mut out = obj.clone();
        let (from, to) = match desired {
            "v1" => ("y", "x"),
            "v2" => ("x", "y"),
            other => return Err(format!("unknown {other}")),
        };
        let data = out["data"].as_object_mut().ok_or("no data")?;
        if let Some(v) = data.remove(from) {
            data.insert(to.to_owned(), v);
        }
        out["apiVersion"] = json!(desired);
        Ok(out)
    }

    fn stored_v2(name: &str, rv: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "uid": "u"},
            "data": {"y": "1"},
        }))
        .expect("object")
    }

    #[test]
    fn converts_both_ways_and_keeps_metadata() {
        let s: Stored<ConfigMap> = Stored::new("v2", Some(rename));
        assert!(s.converts());
        assert_eq!(s.resource().api_version, "v2");
        let cm = s.served(&stored_v2("a", "7")).expect("served");
        assert_eq!(
            cm.data
                .as_ref()
                .and_then(|d| d.get("x"))
                .map(String::as_str),
            Some("1")
        );
        assert_eq!(cm.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(cm.metadata.uid.as_deref(), Some("u"));
        let back = s.stored(&cm).expect("stored");
        assert_eq!(back.data["data"], json!({"y": "1"}));
        assert_eq!(back.types.map(|t| t.api_version).as_deref(), Some("v2"));
        assert_eq!(back.metadata.resource_version.as_deref(), Some("7"));
    }

    #[test]
    fn same_version_needs_no_conversion() {
        let s: Stored<ConfigMap> = Stored::new("v1", None);
        assert!(!s.converts());
        let mut o = stored_v2("a", "1");
        o.data = json!({"data": {"x": "2"}});
        let cm = s.served(&o).expect("served");
        assert_eq!(
            cm.data.and_then(|d| d.get("x").cloned()).as_deref(),
            Some("2")
        );
    }

    #[test]
    fn a_missing_or_failing_conversion_is_an_error() {
        let s: Stored<ConfigMap> = Stored::new("v2", None);
        assert!(matches!(
            s.served(&stored_v2("a", "1")),
            Err(Error::Convert { .. })
        ));
        let s: Stored<ConfigMap> = Stored::new("v2", Some(rename));
        let mut bad = stored_v2("a", "1");
        bad.data = json!({"data": "not a map"});
        assert!(matches!(s.served(&bad), Err(Error::Convert { .. })));
    }

    #[test]
    fn watch_events_are_converted_and_unconvertible_objects_left_out() {
        let s: Stored<ConfigMap> = Stored::new("v2", Some(rename));
        let ok = s.event(Ok(watcher::Event::Apply(stored_v2("a", "3"))));
        let Some(Ok(watcher::Event::Apply(cm))) = ok else {
            panic!("not an apply: {ok:?}");
        };
        assert_eq!(cm.metadata.name.as_deref(), Some("a"));
        let mut bad = stored_v2("b", "4");
        bad.data = json!({"data": "not a map"});
        assert!(s.event(Ok(watcher::Event::Delete(bad))).is_none());
        assert!(matches!(
            s.event(Ok(watcher::Event::InitDone)),
            Some(Ok(watcher::Event::InitDone))
        ));
    }

    #[test]
    fn merge_diff_of_objects_and_arrays() {
        assert_eq!(merge_diff(&json!({"a": 1}), &json!({"a": 1})), None);
        assert_eq!(
            merge_diff(
                &json!({"a": 1, "b": {"c": 1, "d": 2}, "e": [1], "f": 1}),
                &json!({"a": 1, "b": {"c": 2, "d": 2}, "e": [1, 2], "g": 3})
            ),
            Some(json!({"b": {"c": 2}, "e": [1, 2], "f": null, "g": 3}))
        );
    }

    #[test]
    fn patches_split_status_from_the_object() {
        let s: Stored<ConfigMap> = Stored::new("v2", Some(rename));
        let before = s.served(&stored_v2("a", "1")).expect("served");
        assert_eq!(
            s.patches(&before, &before).expect("patches"),
            Patches::default()
        );
        let mut after = before.clone();
        after.data = Some([("x".to_owned(), "2".to_owned())].into());
        after.metadata.labels = Some([("l".to_owned(), "v".to_owned())].into());
        let p = s.patches(&before, &after).expect("patches");
        // Written at the stored version: `y`, not `x`.
        assert_eq!(
            p.object,
            Some(json!({"data": {"y": "2"}, "metadata": {"labels": {"l": "v"}}}))
        );
        assert_eq!(p.status, None);
    }
}
