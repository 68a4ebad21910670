//! Update ordering rules shared by the workloads: priority and scatter.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Order in which pods are updated. Only one of `orderPriority` and `weightPriority` may be set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePriorityStrategy {
    /// Sort by the integer found at the end of these label values, first key first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order_priority: Vec<UpdatePriorityOrderTerm>,
    /// Sort by the sum of the weights of the terms whose selector matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weight_priority: Vec<UpdatePriorityWeightTerm>,
}

/// Order pods by the value of one label.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePriorityOrderTerm {
    /// Label key; its value's last integer (5 in `sts-5`) is the order.
    pub ordered_key: String,
}

/// Weight added to pods matching a selector.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePriorityWeightTerm {
    /// Weight, 1–100.
    pub weight: i32,
    /// Pods whose labels match get the weight.
    pub match_selector: LabelSelector,
}

/// Label key/values whose pods are spread over update batches instead of being updated together.
pub type UpdateScatterStrategy = Vec<UpdateScatterTerm>;

/// One label key/value to scatter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct UpdateScatterTerm {
    /// Label key.
    pub key: String,
    /// Label value.
    pub value: String,
}
