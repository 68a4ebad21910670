//! The controller's error: it has no failure kind of its own, so it is a failed API call (the
//! runner's metric label and conflict test come with [`KubeError`]).

pub use crate::runner::KubeError as Error;
