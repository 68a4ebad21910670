//! Advanced StatefulSet admission: validation (`/validate-apps-kruise-io-statefulset`), after
//! upstream's `pkg/webhook/statefulset/validating`. Like CloneSet's, it works on raw JSON so a
//! wrongly typed field is reported by path; it reuses CloneSet's selector, int-or-percent and
//! InPlaceOnly checks.

pub mod validation;
