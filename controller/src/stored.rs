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

/// Replaces the status of `obj` (read as `K`) at its CRD's storage version, guarded by its
/// resourceVersion: a status write keeps the stored spec and metadata, so only the status of
/// the converted body counts.
pub async fn replace_status<K>(client: &kube::Client, obj: &K) -> Result<K, StatusError>
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
    let stored = of::<K>();
    let body = stored.stored(obj)?;
    let name = obj.meta().name.as_deref().unwrap_or_default();
    let written = stored
        .api(client.clone(), obj.meta().namespace.as_deref())
        .replace_status(name, &kube::api::PostParams::default(), &body)
        .await?;
    Ok(stored.served(&written)?)
}

/// A failed [`replace_status`].
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Stored(#[from] Error),
}

#[cfg(test)]
#[path = "stored_tests.rs"]
mod tests;
