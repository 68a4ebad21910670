//! NodeImage defaulting (upstream `SetDefaultsNodeImage`).

use serde_json::{Value, json};

use crate::json::default_field;
use crate::pull_template::{DEFAULT_BACKOFF_LIMIT, DEFAULT_PULL_TIMEOUT_SECONDS};
use crate::review::{Outcome, Request, creating_or_updating, patch_or_allow};

/// `/mutate-apps-kruise-io-nodeimage`: `now` is the creation time given to tags without one.
pub fn mutate(req: &Request) -> Outcome {
    let obj = match creating_or_updating(req) {
        Ok(Some(o)) => o,
        Ok(None) => return Outcome::Allow,
        Err(o) => return o,
    };
    let mut after = obj.clone();
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    default_nodeimage(&mut after, &now);
    patch_or_allow(obj, &after)
}

/// Upstream's `SetDefaultsNodeImage`: every tag gets a creation time and a pull policy.
pub fn default_nodeimage(ni: &mut Value, now: &str) {
    let Some(images) = ni
        .get_mut("spec")
        .and_then(|s| s.get_mut("images"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for image in images.values_mut() {
        let Some(tags) = image.get_mut("tags").and_then(Value::as_array_mut) else {
            continue;
        };
        for tag in tags.iter_mut().filter_map(Value::as_object_mut) {
            default_field(tag, "createdAt", json!(now));
            default_field(tag, "pullPolicy", json!({}));
            if let Some(pp) = tag.get_mut("pullPolicy").and_then(Value::as_object_mut) {
                default_field(pp, "timeoutSeconds", json!(DEFAULT_PULL_TIMEOUT_SECONDS));
                default_field(pp, "backoffLimit", json!(DEFAULT_BACKOFF_LIMIT));
            }
        }
    }
}
