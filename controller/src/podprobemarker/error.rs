//! The controllers' error: they have no failure kind of their own, so it is a failed API call
//! (the runner's metric label and conflict test come with [`KubeError`]).

pub use crate::runner::KubeError as Error;
