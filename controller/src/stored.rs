//! The one switch of which version the manager reads and writes each Kruise kind at: the CRD's
//! storage version ([`kruise_api::crds::STORAGE_VERSIONS`]), converted in process to the version
//! a controller is written against with the conversion webhook's own functions
//! ([`kruise_webhook::converter`]). See [`kruise_runtime::stored`].

use std::fmt::Debug;

use kube::{CustomResourceExt, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use kruise_runtime::stored::{Error, Stored};

/// How `K` is read and written at its CRD's storage version.
pub fn of<K>() -> Stored<K>
where
    K: CustomResourceExt
        + Resource<DynamicType = ()>
        + Serialize
        + DeserializeOwned
        + Clone
        + Debug
        + Send
        + 'static,
{
    let version = kruise_api::crds::storage_version(K::crd_name());
    Stored::new(version, kruise_webhook::converter(&K::kind(&())))
}

#[cfg(test)]
#[path = "stored_tests.rs"]
mod tests;
