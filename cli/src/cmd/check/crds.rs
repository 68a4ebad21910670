//! Whether each CRD the install ships is there, serves the versions it should, and is Established.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client};
use serde_json::Value;

use super::{Check, FIX_INSTALL};
use crate::dev;
use crate::error::{Result, kube_err};

pub(super) async fn check_crd(client: &Client, crd: &Value) -> Result<Check> {
    let name = dev::name(crd);
    let title = format!("CRD {name}");
    let want: Vec<&str> = crd["spec"]["versions"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter(|v| v["served"].as_bool().unwrap_or(false))
                .filter_map(|v| v["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let Some(have) = api.get_opt(name).await.map_err(kube_err)? else {
        return Ok(Check::fail(title, "not installed", FIX_INSTALL));
    };
    let served: Vec<String> = have
        .spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.clone())
        .collect();
    let missing: Vec<&str> = want
        .iter()
        .copied()
        .filter(|w| !served.iter().any(|s| s == w))
        .collect();
    let established = have
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
    Ok(if !missing.is_empty() {
        Check::fail(
            title,
            format!(
                "serves {} but not {}",
                served.join(", "),
                missing.join(", ")
            ),
            "update the CRDs: kubectl kruise install --wait",
        )
    } else if !established {
        Check::fail(
            title,
            "not Established",
            format!("kubectl describe crd {name} (see its conditions)"),
        )
    } else {
        Check::pass(title, format!("serves {}", served.join(", ")))
    })
}
