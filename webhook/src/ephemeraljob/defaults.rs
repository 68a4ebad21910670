//! EphemeralJob defaulting (Kruise-rs; upstream has no mutating hook for the kind): each
//! template container gets the API server's own defaults for a container, `imagePullPolicy`
//! (Always for `:latest` or no tag, else IfNotPresent), `terminationMessagePolicy` File and
//! `terminationMessagePath` /dev/termination-log. Upstream's validation requires the first two,
//! so a job upstream accepts is left as it is.

use serde_json::Value;

use crate::json::default_string;
use crate::review::{Outcome, Request, creating_or_updating, patch_or_allow};
use crate::workload::defaults::pull_policy_for;

/// `/mutate-apps-kruise-io-v1alpha1-ephemeraljob`.
pub fn mutate(req: &Request) -> Outcome {
    let obj = match creating_or_updating(req) {
        Ok(Some(o)) => o,
        Ok(None) => return Outcome::Allow,
        Err(o) => return o,
    };
    let mut after = obj.clone();
    default_ephemeraljob(&mut after);
    patch_or_allow(obj, &after)
}

/// Defaults every template container that is an object; anything else is left for the
/// validation to name.
pub fn default_ephemeraljob(job: &mut Value) {
    let Some(Value::Array(cs)) = job.pointer_mut("/spec/template/ephemeralContainers") else {
        return;
    };
    for c in cs.iter_mut().filter_map(Value::as_object_mut) {
        let policy = pull_policy_for(c.get("image").and_then(Value::as_str).unwrap_or_default());
        default_string(c, "imagePullPolicy", policy);
        default_string(c, "terminationMessagePolicy", "File");
        default_string(c, "terminationMessagePath", "/dev/termination-log");
    }
}
