//! When a run of results becomes a state, as the kubelet's prober worker decides it: a result
//! counts only after `successThreshold` successes or `failureThreshold` failures in a row, and a
//! state is reported only when it differs from the last one reported.

use kruise_api::apps::v1alpha1::ProbeState;

/// The consecutive-results counter of one probe.
#[derive(Debug)]
pub struct Thresholds {
    success: u32,
    failure: u32,
    last: Option<bool>,
    run: u32,
    reported: Option<ProbeState>,
}

impl Thresholds {
    /// Thresholds below 1 count as 1 (the webhook defaults them; an old object may lack them).
    pub fn new(success: i32, failure: i32) -> Self {
        Self {
            success: success.max(1) as u32,
            failure: failure.max(1) as u32,
            last: None,
            run: 0,
            reported: None,
        }
    }

    /// Takes one result; returns the state to report when it changes.
    pub fn observe(&mut self, ok: bool) -> Option<ProbeState> {
        if self.last == Some(ok) {
            self.run = self.run.saturating_add(1);
        } else {
            self.last = Some(ok);
            self.run = 1;
        }
        let needed = if ok { self.success } else { self.failure };
        if self.run < needed {
            return None;
        }
        let state = if ok {
            ProbeState::Succeeded
        } else {
            ProbeState::Failed
        };
        if self.reported == Some(state) {
            return None;
        }
        self.reported = Some(state);
        Some(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(t: &mut Thresholds, results: &[bool]) -> Vec<Option<ProbeState>> {
        results.iter().map(|r| t.observe(*r)).collect()
    }

    #[test]
    fn a_state_needs_its_threshold_in_a_row_and_is_reported_once() {
        let mut t = Thresholds::new(2, 3);
        use ProbeState::*;
        assert_eq!(
            feed(
                &mut t,
                &[
                    true, false, true, true, true, false, false, true, false, false, false, false
                ]
            ),
            [
                None,
                None,
                None,
                Some(Succeeded),
                None,
                None,
                None,
                None,
                None,
                None,
                Some(Failed),
                None
            ]
        );
    }

    #[test]
    fn thresholds_of_one_report_at_once_and_zero_counts_as_one() {
        let mut t = Thresholds::new(0, 1);
        assert_eq!(t.observe(true), Some(ProbeState::Succeeded));
        assert_eq!(t.observe(false), Some(ProbeState::Failed));
        assert_eq!(t.observe(false), None);
    }

    proptest::proptest! {
        /// Reported states alternate, and each is preceded by its threshold of equal results.
        #[test]
        fn reports_alternate_and_follow_a_full_run(results in proptest::collection::vec(proptest::bool::ANY, 0..64), s in 1i32..4, f in 1i32..4) {
            let mut t = Thresholds::new(s, f);
            let mut prev = None;
            for (i, r) in results.iter().enumerate() {
                if let Some(state) = t.observe(*r) {
                    proptest::prop_assert_ne!(Some(state), prev);
                    let need = if *r { s } else { f } as usize;
                    proptest::prop_assert!(i + 1 >= need);
                    proptest::prop_assert!(results[i + 1 - need..=i].iter().all(|x| x == r));
                    prev = Some(state);
                }
            }
        }
    }
}
