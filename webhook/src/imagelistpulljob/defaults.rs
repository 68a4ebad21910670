//! ImageListPullJob defaulting (upstream `SetDefaultsImageListPullJob`: the pull template's).

use crate::pull_template::default_template;
use crate::review::{Outcome, Request, creating_or_updating, patch_or_allow};

/// `/mutate-apps-kruise-io-v1alpha1-imagelistpulljob`.
pub fn mutate(req: &Request) -> Outcome {
    let obj = match creating_or_updating(req) {
        Ok(Some(o)) => o,
        Ok(None) => return Outcome::Allow,
        Err(o) => return o,
    };
    let mut after = obj.clone();
    if !default_template(&mut after) {
        return Outcome::bad_request(
            "ImageListPullJob has a non-object where an object is expected",
        );
    }
    patch_or_allow(obj, &after)
}
