//! CloneSet's side of the shared lifecycle writer ([`write_lifecycle`]): its errors become the
//! CloneSet's, and the sync halves write through the expectations of their context.

use k8s_openapi::api::core::v1::Pod;
use kruise_api::appspub::{LifecycleHook, LifecycleStateType};

use super::error::Error;
use super::sync::Syncer;
use crate::workload::lifecycle::{WriteError, write_lifecycle};

impl From<WriteError> for Error {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Kube(e) => Error::from(e),
            WriteError::Readiness { pod, source } => Error::Readiness { pod, source },
        }
    }
}

impl Syncer<'_> {
    /// Patch the lifecycle label (and, with a hook, its labels and finalizers). Returns whether
    /// the pod was written.
    pub(super) async fn set_lifecycle(
        &self,
        pod: &Pod,
        state: LifecycleStateType,
        handler: Option<&LifecycleHook>,
    ) -> Result<bool, Error> {
        let lifecycle = self.cs.spec.lifecycle.as_ref();
        let expect = |p: &Pod| self.ctx.expect_written(p);
        Ok(write_lifecycle(
            &self.api()?,
            lifecycle,
            pod,
            state,
            handler,
            self.now,
            &expect,
        )
        .await?)
    }
}
