//! PodProbeMarker defaulting: each probe gets the Kubernetes probe defaults (upstream applies
//! `SetDefaults_Probe` and `SetDefaults_HTTPGetAction`): timeoutSeconds 1, periodSeconds 10,
//! successThreshold 1, failureThreshold 3, httpGet path `/` and scheme HTTP. A zero counts as
//! unset, as there.

use serde_json::{Map, Value, json};

use crate::json::default_string;
use crate::review::{Outcome, Request, creating_or_updating, patch_or_allow};

/// `/mutate-apps-kruise-io-v1alpha1-podprobemarker`.
pub fn mutate(req: &Request) -> Outcome {
    let obj = match creating_or_updating(req) {
        Ok(Some(o)) => o,
        Ok(None) => return Outcome::Allow,
        Err(o) => return o,
    };
    let mut after = obj.clone();
    default_podprobemarker(&mut after);
    patch_or_allow(obj, &after)
}

/// Sets `key` to `value` when it is absent, null or 0.
fn default_int(m: &mut Map<String, Value>, key: &str, value: i64) {
    let unset = match m.get(key) {
        None | Some(Value::Null) => true,
        Some(v) => v.as_i64() == Some(0),
    };
    if unset {
        m.insert(key.to_owned(), json!(value));
    }
}

/// Defaults every probe that is an object; anything else is left for the validation to name.
pub fn default_podprobemarker(ppm: &mut Value) {
    let Some(Value::Array(probes)) = ppm.pointer_mut("/spec/probes") else {
        return;
    };
    for p in probes.iter_mut().filter_map(|p| p.get_mut("probe")) {
        let Some(p) = p.as_object_mut() else { continue };
        default_int(p, "timeoutSeconds", 1);
        default_int(p, "periodSeconds", 10);
        default_int(p, "successThreshold", 1);
        default_int(p, "failureThreshold", 3);
        if let Some(h) = p.get_mut("httpGet").and_then(Value::as_object_mut) {
            default_string(h, "path", "/");
            default_string(h, "scheme", "HTTP");
        }
    }
}
