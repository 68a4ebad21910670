//! ImagePullJob defaulting (upstream `SetDefaultsImagePullJob`).

use serde_json::Value;

use crate::json::{default_string, obj_mut};
use crate::pull_template::default_template;
use crate::review::{Outcome, Request, creating_or_updating, patch_or_allow};

/// `/mutate-apps-kruise-io-imagepulljob`.
pub fn mutate(req: &Request) -> Outcome {
    let obj = match creating_or_updating(req) {
        Ok(Some(o)) => o,
        Ok(None) => return Outcome::Allow,
        Err(o) => return o,
    };
    let mut after = obj.clone();
    if !default_imagepulljob(&mut after) {
        return Outcome::bad_request("ImagePullJob has a non-object where an object is expected");
    }
    patch_or_allow(obj, &after)
}

/// Upstream's `SetDefaultsImagePullJob`; `false` when a field that must be an object is not.
pub fn default_imagepulljob(job: &mut Value) -> bool {
    if !default_template(job) {
        return false;
    }
    let Some(spec) = obj_mut(job, &["spec"]) else {
        return false;
    };
    default_string(spec, "imagePullPolicy", "IfNotPresent");
    true
}
