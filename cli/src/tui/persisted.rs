//! The nodes the PersistentPodState targeting the StatefulSet on view recorded for its Pods,
//! read every few seconds for the live view's Pod detail.

use std::collections::BTreeMap;
use std::time::Duration;

use kruise_api::apps::v1alpha1::PersistentPodState;
use kruise_api::policy::v1alpha1::TargetReference;
use kube::Api;
use tokio::sync::mpsc;

/// How often the PersistentPodStates are listed.
const PERIOD: Duration = Duration::from_secs(2);

/// Pod name → recorded node, from the PersistentPodState (of `states`) targeting `target`.
pub fn recorded_nodes(
    states: &[PersistentPodState],
    target: &TargetReference,
) -> BTreeMap<String, String> {
    states
        .iter()
        .find(|p| p.spec.target_reference.same_workload(target))
        .and_then(|p| p.status.as_ref())
        .map(|s| {
            s.pod_states
                .iter()
                .filter(|(_, st)| !st.node_name.is_empty())
                .map(|(pod, st)| (pod.clone(), st.node_name.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Sends the recorded nodes to `tx` until the view goes; stops at once where the kind is not
/// installed or may not be listed.
pub async fn poll(
    api: Api<PersistentPodState>,
    target: TargetReference,
    tx: mpsc::UnboundedSender<BTreeMap<String, String>>,
) {
    loop {
        match api.list(&Default::default()).await {
            Ok(list) => {
                if tx.send(recorded_nodes(&list.items, &target)).is_err() {
                    return;
                }
            }
            Err(kube::Error::Api(s)) if matches!(s.code, 403 | 404) => return,
            Err(e) => tracing::debug!(error = %e, "cannot list PersistentPodStates"),
        }
        tokio::time::sleep(PERIOD).await;
    }
}
