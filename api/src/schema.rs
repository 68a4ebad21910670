//! Schema overrides for fields whose full OpenAPI schema would bloat the CRD past the 256 KiB
//! client-side-apply limit. Like upstream, they are schemaless in the CRD
//! (`x-kubernetes-preserve-unknown-fields`) while the Rust field keeps its real type.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

/// An object of any shape (used for `PodTemplateSpec`).
pub(crate) fn preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A list of objects of any shape (used for `volumeClaimTemplates`).
pub(crate) fn preserve_unknown_object_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        },
    })
}

/// A whole Kubernetes object of any kind (`x-kubernetes-embedded-resource`), kept as written.
pub(crate) fn embedded_resource(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-embedded-resource": true,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A label selector, replaced as a whole by a merge (upstream's `x-kubernetes-map-type: atomic`).
pub(crate) fn atomic_label_selector(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = LabelSelector::json_schema(generator);
    schema.insert("x-kubernetes-map-type".into(), "atomic".into());
    schema
}
