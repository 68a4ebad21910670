//! Advanced StatefulSet admission: defaulting (`/mutate-apps-kruise-io-statefulset`, upstream's
//! `pkg/webhook/statefulset/mutating`) and validation (`/validate-apps-kruise-io-statefulset`),
//! after upstream's `pkg/webhook/statefulset/validating`. Like CloneSet's, it works on raw JSON so a
//! wrongly typed field is reported by path; it reuses CloneSet's selector, int-or-percent and
//! InPlaceOnly checks; [`claims`] checks claim-template resizes against their StorageClass.
//! [`conversion`] maps v1alpha1 ⇄ v1beta1 for the CRD's conversion webhook.

pub mod claims;
pub mod conversion;
pub mod defaults;
pub mod validation;
