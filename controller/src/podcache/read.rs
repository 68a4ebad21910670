//! Pods decoded without `metadata.managedFields`.
//!
//! A Pod the kubelet has written carries managedFields for every writer, each with a field
//! set (`fieldsV1`) that decodes into a tree of JSON maps: about a third of the Pod's bytes and
//! about 40 % of its decode. No controller reads them, and [`super::slim`] dropped them after
//! the decode. [`PodRead`] is a Pod whose decode skips them, for the Pod watch and for the
//! answers to the manager's own Pod writes. [`PodWritten`] keeps only the resourceVersion, for
//! a write whose answer is read for nothing else.
//!
//! Both are addressed like Pods (same group, version, kind and plural), so an `Api` of either
//! reads and writes `/api/v1/.../pods`. A Pod sent back to the server without managedFields
//! keeps the server's: a patch leaves them alone, and an update that omits them keeps them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};

/// A Pod as read from the API server, without `metadata.managedFields`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodRead(pub Pod);

/// The answer to a Pod write when only its resourceVersion is wanted: the rest of the Pod is
/// scanned over, not decoded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodWritten {
    metadata: ObjectMeta,
}

impl PodWritten {
    /// The resourceVersion the write produced.
    pub fn into_resource_version(self) -> Option<String> {
        self.metadata.resource_version
    }
}

/// Addressed as a Pod: `kube::Resource` follows from this and `k8s_openapi::Metadata`.
macro_rules! addressed_as_pod {
    ($t:ty) => {
        impl k8s_openapi::Resource for $t {
            const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
            const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
            const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
            const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
            const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
            type Scope = <Pod as k8s_openapi::Resource>::Scope;
        }
    };
}

addressed_as_pod!(PodRead);
addressed_as_pod!(PodWritten);

impl k8s_openapi::Metadata for PodRead {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.0.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

impl k8s_openapi::Metadata for PodWritten {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// `ObjectMeta` as sent, every field but `managedFields`; that key, not named here, is skipped
/// by the decoder without building anything.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl From<Meta> for ObjectMeta {
    fn from(m: Meta) -> Self {
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        }
    }
}

impl<'de> Deserialize<'de> for PodRead {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // apiVersion and kind are not checked: both types are only read from the pods
        // endpoints, whose answers are Pods (an error is a Status, handled before the decode).
        #[derive(Deserialize)]
        struct Wire {
            metadata: Option<Meta>,
            spec: Option<PodSpec>,
            status: Option<PodStatus>,
        }
        let w = Wire::deserialize(d)?;
        Ok(PodRead(Pod {
            metadata: w.metadata.map(ObjectMeta::from).unwrap_or_default(),
            spec: w.spec,
            status: w.status,
        }))
    }
}

impl<'de> Deserialize<'de> for PodWritten {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            metadata: Option<Version>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Version {
            resource_version: Option<String>,
        }
        let w = Wire::deserialize(d)?;
        Ok(PodWritten {
            metadata: ObjectMeta {
                resource_version: w.metadata.and_then(|m| m.resource_version),
                ..ObjectMeta::default()
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use serde_json::json;

    /// Every field of ObjectMeta set. Written out without `..Default::default()`, so that a
    /// field k8s-openapi adds fails to compile here until [`Meta`] carries it too.
    fn full_meta() -> ObjectMeta {
        let t = Time(
            k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).expect("a valid timestamp"),
        );
        ObjectMeta {
            annotations: Some(BTreeMap::from([("a".into(), "x".into())])),
            creation_timestamp: Some(t.clone()),
            deletion_grace_period_seconds: Some(30),
            deletion_timestamp: Some(t),
            finalizers: Some(vec!["f".into()]),
            generate_name: Some("g-".into()),
            generation: Some(3),
            labels: Some(BTreeMap::from([
                ("l".into(), "y".into()),
                // A label may be named like the skipped field: only the metadata key is skipped.
                ("managedFields".into(), "z".into()),
            ])),
            managed_fields: Some(vec![ManagedFieldsEntry {
                api_version: Some("v1".into()),
                fields_type: Some("FieldsV1".into()),
                fields_v1: Some(FieldsV1(json!({"f:metadata": {"f:labels": {".": {}}}}))),
                manager: Some("kubelet".into()),
                operation: Some("Update".into()),
                subresource: Some("status".into()),
                time: None,
            }]),
            name: Some("p".into()),
            namespace: Some("ns".into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps.kruise.io/v1alpha1".into(),
                kind: "CloneSet".into(),
                name: "c".into(),
                uid: "u1".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            resource_version: Some("42".into()),
            self_link: Some("/api/v1/namespaces/ns/pods/p".into()),
            uid: Some("u2".into()),
        }
    }

    fn full_pod() -> Pod {
        let mut pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "spec": {"containers": [{"name": "c", "image": "nginx:1"}], "nodeName": "n1"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .expect("a pod");
        pod.metadata = full_meta();
        pod
    }

    #[test]
    fn a_read_pod_is_the_pod_without_its_managed_fields() {
        let pod = full_pod();
        let text = serde_json::to_string(&pod).expect("encode");
        assert!(text.contains("managedFields"), "the input carries them");
        let PodRead(read) = serde_json::from_str(&text).expect("decode");
        let mut want = pod;
        want.metadata.managed_fields = None;
        assert_eq!(read, want);
    }

    #[test]
    fn a_pod_without_metadata_or_with_nulls_reads_as_k8s_openapi_reads_it() {
        for text in [
            r#"{"apiVersion":"v1","kind":"Pod"}"#,
            r#"{"metadata":null,"spec":null,"status":null}"#,
            r#"{"metadata":{"labels":null,"managedFields":null,"name":"p"}}"#,
        ] {
            let PodRead(read) = serde_json::from_str(text).expect("decode");
            let openapi: Pod = serde_json::from_str(text).expect("decode as Pod");
            assert_eq!(read, openapi, "{text}");
        }
    }

    #[test]
    fn a_wrongly_typed_field_is_still_an_error() {
        let err = serde_json::from_str::<PodRead>(r#"{"metadata":{"labels":["x"]}}"#);
        assert!(err.is_err());
    }

    #[test]
    fn a_written_pod_keeps_only_its_resource_version() {
        let text = serde_json::to_string(&full_pod()).expect("encode");
        let written: PodWritten = serde_json::from_str(&text).expect("decode");
        assert_eq!(written.into_resource_version().as_deref(), Some("42"));
        let bare: PodWritten = serde_json::from_str("{}").expect("decode");
        assert_eq!(bare.into_resource_version(), None);
    }

    #[tokio::test]
    async fn both_are_addressed_as_pods() {
        use kube::Resource;
        assert_eq!(PodRead::plural(&()), Pod::plural(&()));
        assert_eq!(PodWritten::api_version(&()), Pod::api_version(&()));
        assert_eq!(PodRead::kind(&()), "Pod");
        let api: kube::Api<PodRead> = kube::Api::namespaced(
            kube::Client::try_from(kube::Config::new(
                "http://127.0.0.1:1".parse().expect("a url"),
            ))
            .expect("a client"),
            "ns",
        );
        assert_eq!(api.resource_url(), "/api/v1/namespaces/ns/pods");
    }
}
