//! Wire formats of SidecarSet on Pods (upstream `pkg/control/sidecarcontrol`): the hash
//! annotations, the injected list, the working container of a hot-upgrade pair, the
//! SidecarSet hashes themselves, and which Pods a SidecarSet selects.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::apps::v1beta1::{SidecarContainer, SidecarSet, SidecarSetSpec};
use crate::appspub::InPlaceUpdateState;
use crate::{Error, Result, keys, selector};

/// Namespaces never injected (upstream `SidecarIgnoredNamespaces`).
pub const IGNORED_NAMESPACES: [&str; 2] = ["kube-system", "kube-public"];

/// One SidecarSet's entry in the Pod annotations [`keys::SIDECARSET_HASH_ANNOTATION`] and
/// [`keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION`] (upstream `SidecarSetUpgradeSpec`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetUpgradeSpec {
    /// When the entry was last written.
    pub update_timestamp: Time,
    /// The SidecarSet hash the Pod's sidecars correspond to.
    pub hash: String,
    /// The SidecarSet's name.
    pub sidecar_set_name: String,
    /// The sidecar containers this SidecarSet owns in the Pod (for hot upgrade, the pair).
    #[serde(default)]
    pub sidecar_list: Vec<String>,
    /// The ControllerRevision injected, when injection used a stored revision.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub controller_revision: String,
}

/// The Pod's map SidecarSet name → entry. The pre-1.0 format (name → hash) is read too, as
/// upstream does.
pub fn parse_hash_annotation(
    key: &'static str,
    value: &str,
) -> Result<BTreeMap<String, SidecarSetUpgradeSpec>> {
    if value.is_empty() {
        return Ok(BTreeMap::new());
    }
    match serde_json::from_str(value) {
        Ok(m) => Ok(m),
        Err(source) => {
            let old: BTreeMap<String, String> = serde_json::from_str(value)
                .map_err(|_| Error::InvalidAnnotation { key, source })?;
            Ok(old
                .into_iter()
                .map(|(name, hash)| {
                    let spec = SidecarSetUpgradeSpec {
                        update_timestamp: Time(jiff::Timestamp::UNIX_EPOCH),
                        hash,
                        sidecar_set_name: name.clone(),
                        sidecar_list: Vec::new(),
                        controller_revision: String::new(),
                    };
                    (name, spec)
                })
                .collect())
        }
    }
}

/// Serializes the map for the annotation.
pub fn format_hash_annotation(m: &BTreeMap<String, SidecarSetUpgradeSpec>) -> Result<String> {
    serde_json::to_string(m).map_err(|source| Error::Serialize {
        what: "sidecarset hash annotation",
        source,
    })
}

/// The hash recorded for `sidecar_set` in a Pod's annotation `key`, if any (upstream
/// `GetPodSidecarSetRevision`); unreadable annotations count as absent.
pub fn pod_hash(
    annotations: Option<&BTreeMap<String, String>>,
    key: &'static str,
    sidecar_set: &str,
) -> Option<String> {
    let value = annotations?.get(key)?;
    parse_hash_annotation(key, value)
        .ok()?
        .remove(sidecar_set)
        .map(|s| s.hash)
}

/// The Pod annotation [`keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION`]: SidecarSet name →
/// the state of its in-place sidecar upgrade (upstream keeps one `InPlaceUpdateState` each).
pub fn parse_inplace_states(value: &str) -> Result<BTreeMap<String, InPlaceUpdateState>> {
    if value.is_empty() {
        return Ok(BTreeMap::new());
    }
    serde_json::from_str(value).map_err(|source| Error::InvalidAnnotation {
        key: keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION,
        source,
    })
}

/// Serializes the in-place state map.
pub fn format_inplace_states(m: &BTreeMap<String, InPlaceUpdateState>) -> Result<String> {
    serde_json::to_string(m).map_err(|source| Error::Serialize {
        what: "sidecarset in-place update state annotation",
        source,
    })
}

/// Names in [`keys::SIDECARSET_INJECTED_LIST_ANNOTATION`] (comma-separated).
pub fn parse_injected_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The Pod annotation [`keys::SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION`]:
/// sidecar name → the container of its pair that serves now.
pub fn parse_working_containers(value: &str) -> Result<BTreeMap<String, String>> {
    if value.is_empty() {
        return Ok(BTreeMap::new());
    }
    serde_json::from_str(value).map_err(|source| Error::InvalidAnnotation {
        key: keys::SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION,
        source,
    })
}

/// Serializes the working-container map.
pub fn format_working_containers(m: &BTreeMap<String, String>) -> Result<String> {
    serde_json::to_string(m).map_err(|source| Error::Serialize {
        what: "working hot-upgrade container annotation",
        source,
    })
}

/// The two containers of a hot-upgrade sidecar (upstream `GetHotUpgradeContainerName`).
pub fn hot_upgrade_container_names(sidecar: &str) -> (String, String) {
    (format!("{sidecar}-1"), format!("{sidecar}-2"))
}

/// The other container of a hot-upgrade pair.
pub fn hot_upgrade_other(container: &str) -> Option<String> {
    let (base, n) = container.rsplit_once('-')?;
    match n {
        "1" => Some(format!("{base}-2")),
        "2" => Some(format!("{base}-1")),
        _ => None,
    }
}

/// Names of every container the SidecarSet owns in a Pod (upstream `GetSidecarContainersInPod`).
pub fn containers_in_pod(spec: &SidecarSetSpec) -> Vec<String> {
    let mut names = Vec::new();
    for c in &spec.containers {
        if c.is_hot_upgrade() {
            let (a, b) = hot_upgrade_container_names(&c.container.name);
            names.push(a);
            names.push(b);
        } else {
            names.push(c.container.name.clone());
        }
    }
    names
}

const SAFE_ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Go's `rand.SafeEncodeString`.
fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| SAFE_ALPHANUMS[usize::from(b) % SAFE_ALPHANUMS.len()] as char)
        .collect()
}

fn encode(containers: &[SidecarContainer], init: &[SidecarContainer]) -> Result<String> {
    let mut m = serde_json::Map::new();
    let ser = |v: &[SidecarContainer]| {
        serde_json::to_value(v).map_err(|source| Error::Serialize {
            what: "sidecar containers",
            source,
        })
    };
    m.insert("containers".into(), ser(containers)?);
    // Native sidecars (init containers with restartPolicy Always) run for the Pod's life, so
    // changing them is an upgrade too.
    if init.iter().any(SidecarContainer::is_native_sidecar) {
        m.insert("initContainers".into(), ser(init)?);
    }
    let v = Value::Object(m);
    Ok(v.to_string())
}

fn digest(data: &str) -> String {
    let d = Sha256::digest(data.as_bytes());
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    safe_encode(&hex)
}

/// The SidecarSet's hash over its containers (upstream `SidecarSetHash`).
pub fn sidecarset_hash(spec: &SidecarSetSpec) -> Result<String> {
    Ok(digest(&encode(&spec.containers, &spec.init_containers)?))
}

/// The hash with every image blanked (upstream `SidecarSetHashWithoutImage`): equal hashes
/// mean only images changed, which is what may be upgraded in place.
pub fn sidecarset_hash_without_image(spec: &SidecarSetSpec) -> Result<String> {
    let blank = |v: &[SidecarContainer]| -> Vec<SidecarContainer> {
        v.iter()
            .cloned()
            .map(|mut c| {
                c.container.image = Some(String::new());
                c
            })
            .collect()
    };
    Ok(digest(&encode(
        &blank(&spec.containers),
        &blank(&spec.init_containers),
    )?))
}

/// The hash the SidecarSet webhook recorded on the SidecarSet, or the one computed now.
pub fn current_hash(set: &SidecarSet, key: &'static str) -> Result<String> {
    if let Some(h) = set.metadata.annotations.as_ref().and_then(|a| a.get(key)) {
        return Ok(h.clone());
    }
    if key == keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION {
        sidecarset_hash_without_image(&set.spec)
    } else {
        sidecarset_hash(&set.spec)
    }
}

/// Whether the SidecarSet selects a Pod with these labels in a namespace with these labels
/// (upstream `PodMatchedSidecarSet`). A missing or empty selector selects nothing.
pub fn selects(
    spec: &SidecarSetSpec,
    namespace: &str,
    pod_labels: &BTreeMap<String, String>,
    namespace_labels: &BTreeMap<String, String>,
) -> bool {
    if IGNORED_NAMESPACES.contains(&namespace) {
        return false;
    }
    if let Some(ns) = &spec.namespace_selector {
        // The name label is set by the apiserver; fall back to the name for namespaces read
        // from a cache that lacks it.
        let mut labels = namespace_labels.clone();
        labels
            .entry(keys::k8s::NAMESPACE_NAME_LABEL.to_owned())
            .or_insert_with(|| namespace.to_owned());
        if !selector::matches(ns, &labels) {
            return false;
        }
    }
    match &spec.selector {
        Some(sel) if !selector::is_empty(sel) => selector::matches(sel, pod_labels),
        _ => false,
    }
}

/// Whether the SidecarSet selects `pod`, whose namespace carries `namespace_labels`: the one
/// matcher of injection (webhook) and upgrade (controller), so both act on the same Pods
/// (upstream `PodMatchedSidecarSet`, which both of its callers share too).
pub fn selects_pod(
    spec: &SidecarSetSpec,
    pod: &Pod,
    namespace_labels: &BTreeMap<String, String>,
) -> bool {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let empty = BTreeMap::new();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    selects(spec, ns, labels, namespace_labels)
}

/// The spec fields a SidecarSet ControllerRevision records (upstream
/// `copySidecarSetSpecRevision`); what injection of a stored revision restores.
pub const REVISION_SPEC_FIELDS: [&str; 5] = [
    "volumes",
    "containers",
    "initContainers",
    "imagePullSecrets",
    "patchPodMetadata",
];

/// The data of a SidecarSet ControllerRevision: `{"spec": {…the recorded fields…}}`, absent
/// fields as `null` as upstream writes them (upstream `getPatch`).
pub fn revision_data(spec: &SidecarSetSpec) -> Result<Value> {
    let raw = serde_json::to_value(spec).map_err(|source| Error::Serialize {
        what: "sidecarset spec",
        source,
    })?;
    let mut copy = serde_json::Map::new();
    for f in REVISION_SPEC_FIELDS {
        copy.insert(f.to_owned(), raw.get(f).cloned().unwrap_or(Value::Null));
    }
    Ok(json!({ "spec": copy }))
}

/// `set` as a stored revision recorded it (upstream `GetHistorySidecarSet`): the recorded
/// fields replace the current ones, and the hashes are the revision's (or computed from the
/// restored spec when the revision lacks them).
pub fn restore_revision(
    set: &SidecarSet,
    data: &Value,
    revision_annotations: &BTreeMap<String, String>,
) -> Result<SidecarSet> {
    let mut spec = serde_json::to_value(&set.spec).map_err(|source| Error::Serialize {
        what: "sidecarset spec",
        source,
    })?;
    let recorded = data.get("spec").and_then(Value::as_object);
    if let (Some(obj), Some(rec)) = (spec.as_object_mut(), recorded) {
        for f in REVISION_SPEC_FIELDS {
            match rec.get(f) {
                Some(Value::Null) | None => {
                    obj.remove(f);
                }
                Some(v) => {
                    obj.insert(f.to_owned(), v.clone());
                }
            }
        }
    }
    let mut out = set.clone();
    out.spec = serde_json::from_value(spec).map_err(|source| Error::Serialize {
        what: "sidecarset revision data",
        source,
    })?;
    let ann = out.metadata.annotations.get_or_insert_default();
    for (key, compute) in [
        (
            keys::SIDECARSET_HASH_ANNOTATION,
            sidecarset_hash as fn(&SidecarSetSpec) -> Result<String>,
        ),
        (
            keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION,
            sidecarset_hash_without_image,
        ),
    ] {
        let v = match revision_annotations.get(key).filter(|v| !v.is_empty()) {
            Some(v) => v.clone(),
            None => compute(&out.spec)?,
        };
        ann.insert(key.to_owned(), v);
    }
    Ok(out)
}

/// The v1beta1 `namespaceSelector` equivalent of v1alpha1's `namespace` (upstream conversion).
pub fn namespace_as_selector(namespace: &str) -> Value {
    json!({"matchLabels": {keys::k8s::NAMESPACE_NAME_LABEL: namespace}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn spec(image: &str) -> SidecarSetSpec {
        serde_json::from_value(json!({
            "selector": {"matchLabels": {"app": "web"}},
            "containers": [{"name": "proxy", "image": image}]
        }))
        .expect("spec")
    }

    #[test]
    fn hash_changes_with_image_but_without_image_hash_does_not() {
        let a = spec("envoy:1");
        let b = spec("envoy:2");
        assert_ne!(
            sidecarset_hash(&a).expect("h"),
            sidecarset_hash(&b).expect("h")
        );
        assert_eq!(
            sidecarset_hash_without_image(&a).expect("h"),
            sidecarset_hash_without_image(&b).expect("h")
        );
        let mut c = spec("envoy:1");
        c.containers[0].container.args = Some(vec!["-v".into()]);
        assert_ne!(
            sidecarset_hash_without_image(&a).expect("h"),
            sidecarset_hash_without_image(&c).expect("h")
        );
        let h = sidecarset_hash(&a).expect("h");
        assert_eq!(h.len(), 64);
        assert!(h.bytes().all(|b| SAFE_ALPHANUMS.contains(&b)), "{h}");
    }

    #[test]
    fn hash_annotation_reads_both_formats() {
        let new = r#"{"sc":{"updateTimestamp":"2024-01-02T03:04:05Z","hash":"abc","sidecarSetName":"sc","sidecarList":["proxy"]}}"#;
        let m = parse_hash_annotation(keys::SIDECARSET_HASH_ANNOTATION, new).expect("new");
        assert_eq!(m["sc"].hash, "abc");
        assert_eq!(m["sc"].sidecar_list, vec!["proxy".to_owned()]);
        let back = format_hash_annotation(&m).expect("fmt");
        assert_eq!(
            serde_json::from_str::<Value>(&back).expect("json"),
            serde_json::from_str::<Value>(new).expect("json")
        );
        let old = parse_hash_annotation(keys::SIDECARSET_HASH_ANNOTATION, r#"{"sc":"xyz"}"#)
            .expect("old");
        assert_eq!(old["sc"].hash, "xyz");
        let err =
            parse_hash_annotation(keys::SIDECARSET_HASH_ANNOTATION, "[1]").expect_err("garbage");
        assert!(
            err.to_string().contains("kruise.io/sidecarset-hash"),
            "{err}"
        );
    }

    #[test]
    fn selection_by_labels_and_namespace() {
        let mut s = spec("e:1");
        let web = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
        let db = BTreeMap::from([("app".to_owned(), "db".to_owned())]);
        let none = BTreeMap::new();
        assert!(selects(&s, "team-a", &web, &none));
        assert!(!selects(&s, "team-a", &db, &none));
        assert!(!selects(&s, "kube-system", &web, &none));
        s.namespace_selector =
            serde_json::from_value(namespace_as_selector("team-b")).expect("sel");
        assert!(!selects(&s, "team-a", &web, &none));
        assert!(selects(&s, "team-b", &web, &none));
        // A label of the namespace, as the webhook and the controller both read it.
        s.namespace_selector = Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("team".to_owned(), "mesh".to_owned())])),
            ..Default::default()
        });
        let mesh = BTreeMap::from([("team".to_owned(), "mesh".to_owned())]);
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "team-c", "labels": {"app": "web"}}
        }))
        .expect("pod");
        assert!(selects_pod(&s, &pod, &mesh));
        assert!(!selects_pod(&s, &pod, &none), "unlabelled namespace");
        s.selector = Some(LabelSelector::default());
        assert!(
            !selects(&s, "team-b", &web, &none),
            "empty selector selects nothing"
        );
    }

    #[test]
    fn revision_data_records_the_injected_fields_and_restores_them() {
        let mut old = SidecarSet {
            metadata: Default::default(),
            spec: spec("envoy:1"),
            status: None,
        };
        old.spec.volumes =
            serde_json::from_value(json!([{"name": "v", "emptyDir": {}}])).expect("volumes");
        let data = revision_data(&old.spec).expect("data");
        assert_eq!(data["spec"]["containers"][0]["image"], "envoy:1");
        assert_eq!(data["spec"]["initContainers"], Value::Null);
        assert!(data["spec"].get("selector").is_none(), "{data}");
        let hash = sidecarset_hash(&old.spec).expect("hash");
        let ann = BTreeMap::from([(keys::SIDECARSET_HASH_ANNOTATION.to_owned(), hash.clone())]);
        let mut now = old.clone();
        now.spec = spec("envoy:2");
        let restored = restore_revision(&now, &data, &ann).expect("restore");
        assert_eq!(
            restored.spec.containers[0].container.image.as_deref(),
            Some("envoy:1")
        );
        assert_eq!(restored.spec.volumes.len(), 1);
        let got = restored.metadata.annotations.expect("annotations");
        assert_eq!(got[keys::SIDECARSET_HASH_ANNOTATION], hash);
        // Missing in the revision: computed from the restored spec.
        assert_eq!(
            got[keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION],
            sidecarset_hash_without_image(&old.spec).expect("h")
        );
    }

    #[test]
    fn hot_upgrade_names() {
        assert_eq!(
            hot_upgrade_container_names("proxy"),
            ("proxy-1".to_owned(), "proxy-2".to_owned())
        );
        assert_eq!(hot_upgrade_other("proxy-1").as_deref(), Some("proxy-2"));
        assert_eq!(
            hot_upgrade_other("my-proxy-2").as_deref(),
            Some("my-proxy-1")
        );
        assert_eq!(hot_upgrade_other("proxy"), None);
        let m = parse_working_containers(r#"{"proxy":"proxy-2"}"#).expect("parse");
        assert_eq!(m["proxy"], "proxy-2");
        assert_eq!(
            parse_injected_list("a,b"),
            vec!["a".to_owned(), "b".to_owned()]
        );
    }
}
