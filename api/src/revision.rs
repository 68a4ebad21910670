//! Which revision a workload pod belongs to: the `controller-revision-hash` and
//! `pod-template-hash` labels (upstream `clonesetutils` revision adapter and
//! `pkg/util/revision`).
//!
//! A revision name is `{workload}-{hash}`; a pod's label may hold the full name or only the hash,
//! so both sides are compared by their last `-`-separated part as well.

use std::collections::BTreeMap;

use crate::keys;

/// The last `-`-separated part of a revision name: the short hash (upstream `GetShortHash`).
pub fn short_hash(revision: &str) -> &str {
    revision.rsplit('-').next().unwrap_or(revision)
}

/// The revision a pod's labels name (`controller-revision-hash`), if any.
pub fn pod_revision(labels: Option<&BTreeMap<String, String>>) -> Option<&str> {
    labels?
        .get(keys::CONTROLLER_REVISION_HASH_LABEL)
        .map(String::as_str)
}

/// Whether a pod's `controller-revision-hash` label value names `revision` (upstream
/// `EqualToRevisionHash`): equal, or equal short hashes. A missing label compares as the empty
/// string, exactly as upstream's map lookup does.
pub fn equal_to_revision_hash(pod_hash: Option<&str>, revision: &str) -> bool {
    let pod_hash = pod_hash.unwrap_or_default();
    pod_hash == revision || short_hash(pod_hash) == short_hash(revision)
}

/// Whether the pod with these labels belongs to `revision`.
pub fn labels_match_revision(labels: Option<&BTreeMap<String, String>>, revision: &str) -> bool {
    equal_to_revision_hash(pod_revision(labels), revision)
}

/// Marks a pod as belonging to `revision` (upstream `WriteRevisionHash` with the
/// CloneSetShortHash gate off): the full name in `controller-revision-hash`, the short hash in
/// `pod-template-hash`.
pub fn write_revision_labels(labels: &mut BTreeMap<String, String>, revision: &str) {
    labels.insert(
        keys::CONTROLLER_REVISION_HASH_LABEL.to_owned(),
        revision.to_owned(),
    );
    labels.insert(
        keys::POD_TEMPLATE_HASH_LABEL.to_owned(),
        short_hash(revision).to_owned(),
    );
}

/// [`write_revision_labels`] under the CloneSetShortHash gate: only the short hash in
/// `controller-revision-hash` too. Both forms name the same revision when compared
/// ([`equal_to_revision_hash`]), so Pods labelled before the gate was turned on stay updated.
pub fn write_short_revision_labels(labels: &mut BTreeMap<String, String>, revision: &str) {
    let short = short_hash(revision);
    labels.insert(
        keys::CONTROLLER_REVISION_HASH_LABEL.to_owned(),
        short.to_owned(),
    );
    labels.insert(keys::POD_TEMPLATE_HASH_LABEL.to_owned(), short.to_owned());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_hash_table() {
        for (name, want) in [
            ("demo-abc12", "abc12"),
            ("abc12", "abc12"),
            ("my-app-7f9c", "7f9c"),
            ("cs-", ""),
            ("", ""),
        ] {
            assert_eq!(short_hash(name), want, "{name}");
        }
    }

    /// Upstream compares a missing label as "", so only a revision whose short hash is empty
    /// matches an unlabelled pod (the engine's old copy refused it).
    #[test]
    fn equality_table() {
        let cases: [(Option<&str>, &str, bool); 9] = [
            (Some("demo-abc"), "demo-abc", true),
            (Some("abc"), "demo-abc", true),
            (Some("demo-abc"), "abc", true),
            (Some("other-abc"), "demo-abc", true),
            (Some("demo-abd"), "demo-abc", false),
            (None, "demo-abc", false),
            (Some(""), "demo-abc", false),
            (None, "", true),
            (None, "demo-", true),
        ];
        for (pod, revision, want) in cases {
            assert_eq!(
                equal_to_revision_hash(pod, revision),
                want,
                "{pod:?} vs {revision}"
            );
        }
    }

    #[test]
    fn write_then_match() {
        let mut labels = BTreeMap::new();
        assert!(!labels_match_revision(Some(&labels), "cs-7f9c"));
        write_revision_labels(&mut labels, "cs-7f9c");
        assert_eq!(pod_revision(Some(&labels)), Some("cs-7f9c"));
        assert_eq!(
            labels
                .get(keys::POD_TEMPLATE_HASH_LABEL)
                .map(String::as_str),
            Some("7f9c")
        );
        assert!(labels_match_revision(Some(&labels), "cs-7f9c"));
        assert!(labels_match_revision(Some(&labels), "7f9c"));
        assert!(!labels_match_revision(Some(&labels), "cs-8000"));
        assert!(!labels_match_revision(None, "cs-7f9c"));
    }

    /// Upstream `WriteRevisionHash` with CloneSetShortHash: the hash alone in both labels, and
    /// the Pod still matches the revision's full name.
    #[test]
    fn short_form_writes_the_hash_and_still_matches_the_name() {
        let mut labels = BTreeMap::new();
        write_short_revision_labels(&mut labels, "my-app-7f9c");
        assert_eq!(pod_revision(Some(&labels)), Some("7f9c"));
        assert_eq!(
            labels
                .get(keys::POD_TEMPLATE_HASH_LABEL)
                .map(String::as_str),
            Some("7f9c")
        );
        assert!(labels_match_revision(Some(&labels), "my-app-7f9c"));
        assert!(!labels_match_revision(Some(&labels), "my-app-8000"));
    }
}
