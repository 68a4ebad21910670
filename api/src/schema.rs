//! Schema overrides for fields whose full OpenAPI schema would bloat the CRD past the 256 KiB
//! client-side-apply limit. Like upstream, they are schemaless in the CRD
//! (`x-kubernetes-preserve-unknown-fields`) while the Rust field keeps its real type.

use schemars::{Schema, SchemaGenerator, json_schema};

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
