//! The pause a workload's reconcile takes, in proportion to the Pods it walked, before the next
//! reconcile of the same workload may start.
//!
//! Every event of any of a workload's Pods asks for a reconcile, and each reconcile walks every
//! Pod (claim, revisions, counts, the refresh). Without a pause, a large workload's reconciles
//! ran back to back through a rollout: about 700 for a 2,000-Pod CloneSet, work that grew with
//! N². The runner keeps the requests that arrive while an object's reconcile runs and hands them
//! over as one when it returns, so the events of the pause are coalesced into one reconcile.
//!
//! The pause is taken at the end of a reconcile, not at the start of the next: the next one then
//! starts from the store's current object, never from one read before the pause. It holds one of
//! the controller's workers meanwhile, which is what bounds the walks' share of the CPU.

use std::time::Duration;

/// Pause per Pod walked: about ten times what a walk costs per Pod, so the walks of one large
/// workload take at most about a tenth of a core. 0.25 ms for 10 Pods, 50 ms for 2,000,
/// 125 ms for 5,000.
const PER_POD: Duration = Duration::from_micros(25);

/// Upper bound of the pause, whatever the size.
const MAX: Duration = Duration::from_millis(250);

/// The pause after a reconcile that walked `pods` Pods.
pub fn after_walking(pods: usize) -> Duration {
    PER_POD
        .saturating_mul(u32::try_from(pods).unwrap_or(u32::MAX))
        .min(MAX)
}

/// Takes the pause after a reconcile that walked `pods` Pods.
pub async fn pause(pods: usize) {
    let d = after_walking(pods);
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_grows_with_the_pods_walked_up_to_its_bound() {
        assert_eq!(after_walking(0), Duration::ZERO);
        assert_eq!(after_walking(10), Duration::from_micros(250));
        assert_eq!(after_walking(2_000), Duration::from_millis(50));
        assert_eq!(after_walking(5_000), Duration::from_millis(125));
        assert_eq!(after_walking(100_000), MAX);
    }
}
