//! ResourceDistribution, apps.kruise.io/v1alpha1 (upstream
//! `apis/apps/v1alpha1/resourcedistribution_types.go`): a cluster-scoped object that copies one
//! Secret or ConfigMap into the namespaces its targets select, and keeps the copies in sync.
//!
//! Beside the types: the reading of `spec.resource` ([`DistributedResource`]) and the hash
//! written on every copy ([`resource_hash`]), the two wire formats the webhook, the controller
//! and the plugin share.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::keys;

pub use crate::apps::v1beta1::{
    ResourceDistributionNamespace, ResourceDistributionTargetNamespaces,
};

/// Desired state of a ResourceDistribution: the resource and where it goes.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "ResourceDistribution",
    shortname = "distributor",
    status = "ResourceDistributionStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ResourceDistribution copies a Secret or ConfigMap into the namespaces its targets select and keeps the copies in sync.",
    printcolumn = r#"{"name":"TOTAL","type":"integer","jsonPath":".status.desired","description":"The desired number of namespaces the resource is distributed to"}"#,
    printcolumn = r#"{"name":"SUCCEED","type":"integer","jsonPath":".status.succeeded","description":"The number of namespaces the resource was distributed to successfully"}"#,
    printcolumn = r#"{"name":"FAILED","type":"integer","jsonPath":".status.failed","description":"The number of namespaces the resource could not be distributed to"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionSpec {
    /// The resource to distribute: a whole Secret or ConfigMap manifest (`apiVersion`, `kind`,
    /// `metadata.name`, data); its namespace is ignored.
    #[schemars(schema_with = "crate::schema::embedded_resource")]
    pub resource: serde_json::Value,
    /// The namespaces the resource goes to.
    pub targets: ResourceDistributionTargets,
}

/// Which namespaces receive the resource: (all, or the listed ones plus those the label
/// selector matches), minus the excluded ones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionTargets {
    /// Every namespace but the excluded ones; overrides `includedNamespaces` and
    /// `namespaceLabelSelector`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_namespaces: bool,
    /// Namespaces that never receive the resource.
    #[serde(
        default,
        skip_serializing_if = "ResourceDistributionTargetNamespaces::is_empty"
    )]
    pub excluded_namespaces: ResourceDistributionTargetNamespaces,
    /// Namespaces that receive the resource by name.
    #[serde(
        default,
        skip_serializing_if = "ResourceDistributionTargetNamespaces::is_empty"
    )]
    pub included_namespaces: ResourceDistributionTargetNamespaces,
    /// Namespaces that receive the resource by label (an empty selector selects none).
    #[serde(default, skip_serializing_if = "crate::selector::is_empty")]
    #[schemars(schema_with = "crate::schema::atomic_label_selector")]
    pub namespace_label_selector: LabelSelector,
}

/// What the controller last saw.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionStatus {
    /// Namespaces the resource should be in.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub desired: i32,
    /// Namespaces the resource is in, as desired.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub succeeded: i32,
    /// Namespaces the resource could not be put in (`desired - succeeded`).
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub failed: i32,
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// One condition of each of upstream's six types, in upstream's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ResourceDistributionCondition>,
}

/// One kind of failure and the namespaces where it happened.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionCondition {
    /// One of upstream's six types ([`ConditionType`]).
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` when it happened in at least one namespace, else `False`.
    pub status: String,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The last error, or `Succeeded`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The namespaces where it happened (upstream's singular JSON name).
    #[serde(
        default,
        rename = "failedNamespace",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub failed_namespaces: Vec<String>,
}

/// Upstream's six condition types, in the order `status.conditions` lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConditionType {
    /// Reading the existing copy failed.
    GetResourceFailed,
    /// Creating a copy failed.
    CreateResourceFailed,
    /// Updating a copy failed.
    UpdateResourceFailed,
    /// Deleting a copy from a namespace no longer targeted failed.
    DeleteResourceFailed,
    /// A same-named object the distribution does not own is in the way (never overwritten).
    ConflictOccurred,
    /// A listed namespace does not exist or is terminating.
    NamespaceNotExists,
}

impl ConditionType {
    /// Every type, in upstream's order (the index is upstream's condition ID).
    pub const ALL: [ConditionType; 6] = [
        Self::GetResourceFailed,
        Self::CreateResourceFailed,
        Self::UpdateResourceFailed,
        Self::DeleteResourceFailed,
        Self::ConflictOccurred,
        Self::NamespaceNotExists,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::GetResourceFailed => keys::RD_CONDITION_GET_RESOURCE_FAILED,
            Self::CreateResourceFailed => keys::RD_CONDITION_CREATE_RESOURCE_FAILED,
            Self::UpdateResourceFailed => keys::RD_CONDITION_UPDATE_RESOURCE_FAILED,
            Self::DeleteResourceFailed => keys::RD_CONDITION_DELETE_RESOURCE_FAILED,
            Self::ConflictOccurred => keys::RD_CONDITION_CONFLICT_OCCURRED,
            Self::NamespaceNotExists => keys::RD_CONDITION_NAMESPACE_NOT_EXISTS,
        }
    }

    /// The type spelled `s`, if it is one.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Whether a failure of this type makes the reconcile retry (upstream retries every type
    /// but a conflict and a missing namespace, which only a user can fix).
    pub fn retried(self) -> bool {
        !matches!(self, Self::ConflictOccurred | Self::NamespaceNotExists)
    }
}

/// The kinds a distribution may carry (upstream's `supportedGKList`): core Secret and ConfigMap.
pub const SUPPORTED_KINDS: [&str; 2] = [keys::k8s::SECRET_KIND, keys::k8s::CONFIGMAP_KIND];

/// Why `spec.resource` cannot be distributed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    /// The field is missing, null or `{}` (upstream: "empty resource is not allowed").
    #[error("empty resource is not allowed")]
    Empty,
    /// Not a JSON object.
    #[error("the resource must be an object (a Secret or ConfigMap manifest)")]
    NotAnObject,
    /// `apiVersion`/`kind` is not core `v1` Secret or ConfigMap.
    #[error(
        "unknown or unsupported resource GroupKind {api_version}/{kind}, only support v1 Secret and v1 ConfigMap"
    )]
    Unsupported { api_version: String, kind: String },
    /// `metadata.name` is missing or empty.
    #[error("the resource must have metadata.name")]
    NoName,
}

/// `spec.resource` read: what it is and what it is called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistributedResource {
    /// `Secret` or `ConfigMap`.
    pub kind: String,
    /// `metadata.name`, the name of every copy.
    pub name: String,
}

impl DistributedResource {
    /// Reads `spec.resource`; only a core v1 Secret or ConfigMap with a name is distributable.
    pub fn parse(resource: &serde_json::Value) -> Result<Self, ResourceError> {
        let obj = match resource {
            serde_json::Value::Null => return Err(ResourceError::Empty),
            serde_json::Value::Object(m) if m.is_empty() => return Err(ResourceError::Empty),
            serde_json::Value::Object(m) => m,
            _ => return Err(ResourceError::NotAnObject),
        };
        let text = |k: &str| obj.get(k).and_then(|v| v.as_str()).unwrap_or_default();
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        if api_version != "v1" || !SUPPORTED_KINDS.contains(&kind) {
            return Err(ResourceError::Unsupported {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            });
        }
        let name = resource
            .pointer("/metadata/name")
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        if name.is_empty() {
            return Err(ResourceError::NoName);
        }
        Ok(Self {
            kind: kind.to_owned(),
            name: name.to_owned(),
        })
    }
}

/// The hash upstream writes in `kruise.io/resourcedistribution.resource.hashcode`: hex SHA-256
/// of `spec.resource` as the API server serialises it (Go's `encoding/json`: compact, keys
/// sorted, `<`, `>`, `&`, U+2028 and U+2029 escaped), so ours equals upstream's for the same
/// object.
pub fn resource_hash(resource: &serde_json::Value) -> String {
    let compact = go_json(resource);
    Sha256::digest(compact.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `value` as Go's `encoding/json` writes it. serde_json's maps are sorted (no
/// `preserve_order`), so only Go's HTML-safe escapes differ; those characters can only occur
/// inside strings, where the escape means the same.
fn go_json(value: &serde_json::Value) -> String {
    let s = value.to_string();
    if !s.contains(['<', '>', '&', '\u{2028}', '\u{2029}']) {
        return s;
    }
    s.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

fn is_zero_i32(n: &i32) -> bool {
    *n == 0
}

fn is_zero_i64(n: &i64) -> bool {
    *n == 0
}

/// An embedded object of any shape, as upstream's `runtime.RawExtension` with
/// `+kubebuilder:pruning:PreserveUnknownFields` and `EmbeddedResource`.
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_a_secret_and_a_configmap_and_refuses_the_rest() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
        assert_eq!(
            DistributedResource::parse(&secret),
            Ok(DistributedResource {
                kind: "Secret".into(),
                name: "s".into()
            })
        );
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert_eq!(
            DistributedResource::parse(&cm).map(|r| r.kind),
            Ok("ConfigMap".into())
        );
        assert_eq!(
            DistributedResource::parse(&json!(null)),
            Err(ResourceError::Empty)
        );
        assert_eq!(
            DistributedResource::parse(&json!({})),
            Err(ResourceError::Empty)
        );
        assert_eq!(
            DistributedResource::parse(&json!("x")),
            Err(ResourceError::NotAnObject)
        );
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        assert!(matches!(
            DistributedResource::parse(&pod),
            Err(ResourceError::Unsupported { .. })
        ));
        let apps = json!({"apiVersion": "apps/v1", "kind": "Secret", "metadata": {"name": "p"}});
        assert!(matches!(
            DistributedResource::parse(&apps),
            Err(ResourceError::Unsupported { .. })
        ));
        let nameless = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {}});
        assert_eq!(
            DistributedResource::parse(&nameless),
            Err(ResourceError::NoName)
        );
    }

    #[test]
    fn hash_is_sha256_of_go_json() {
        // Keys sorted, compact: what the API server returns for this object.
        let v = json!({"kind": "Secret", "apiVersion": "v1", "data": {"a": "YQ=="}});
        let go = r#"{"apiVersion":"v1","data":{"a":"YQ=="},"kind":"Secret"}"#;
        let want: String = Sha256::digest(go.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(resource_hash(&v), want);
        assert_eq!(want.len(), 64);
        assert_eq!(
            go_json(&json!({"x": "<a&b>"})),
            r#"{"x":"\u003ca\u0026b\u003e"}"#
        );
    }

    #[test]
    fn conditions_round_trip_with_upstream_names() {
        let c: ResourceDistributionCondition = serde_json::from_value(json!({
            "type": "ConflictOccurred", "status": "True", "reason": "conflict",
            "failedNamespace": ["a", "b"]
        }))
        .expect("condition");
        assert_eq!(c.failed_namespaces, vec!["a", "b"]);
        assert_eq!(
            ConditionType::parse(&c.type_),
            Some(ConditionType::ConflictOccurred)
        );
        assert_eq!(
            ConditionType::ALL.map(ConditionType::as_str),
            [
                "GetResourceFailed",
                "CreateResourceFailed",
                "UpdateResourceFailed",
                "DeleteResourceFailed",
                "ConflictOccurred",
                "NamespaceNotExists"
            ]
        );
    }
}
