//! The campaign's plan, a pure function of its seed: which fault, in which round, after how
//! long. The generator is SplitMix64, written out here so a seed replays the same plan whatever
//! version of a random-number crate the workspace resolves.

use std::fmt;

use serde::Serialize;

/// A fault the campaign injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// SIGKILL of the manager replica holding the Lease (its container's host process).
    ManagerLeader,
    /// SIGKILL of the other manager replica (the webhook it serves goes with it).
    ManagerStandby,
    /// SIGKILL of kruise-daemon's container process; the kubelet restarts it.
    Daemon,
    /// SIGKILL of kube-apiserver, started again by `hack/cluster.sh restart`.
    #[serde(rename = "apiserver")]
    ApiServer,
    /// SIGKILL of etcd, started again on the same data.
    Etcd,
    /// SIGKILL of the kubelet, started again; the containers keep running.
    Kubelet,
    /// The webhook's certificate Secret deleted: the manager must make a new one.
    CertSecret,
    /// Every watch cut at once: each connection to kube-apiserver destroyed (`ss -K`), the
    /// API server left running.
    WatchCut,
}

impl Fault {
    pub const ALL: [Fault; 8] = [
        Fault::ManagerLeader,
        Fault::ManagerStandby,
        Fault::Daemon,
        Fault::ApiServer,
        Fault::Etcd,
        Fault::Kubelet,
        Fault::CertSecret,
        Fault::WatchCut,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::ManagerLeader => "manager-leader",
            Fault::ManagerStandby => "manager-standby",
            Fault::Daemon => "daemon",
            Fault::ApiServer => "apiserver",
            Fault::Etcd => "etcd",
            Fault::Kubelet => "kubelet",
            Fault::CertSecret => "cert-secret",
            Fault::WatchCut => "watch-cut",
        }
    }

    pub fn parse(s: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == s)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// SplitMix64: small, fast, and the same sequence for a seed on every machine.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0; the tiny modulo bias does not matter here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// One planned fault.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    /// The rollout round it falls in (0-based).
    pub round: usize,
    pub fault: Fault,
    /// Milliseconds after the round's rollouts start, or after the previous fault of the round
    /// was repaired.
    pub delay_ms: u64,
}

/// The longest pause before a fault by default: a rollout of this campaign's sizes is well under
/// way by then.
pub const MAX_DELAY_MS: u64 = 8_000;

/// `kills` faults drawn from `faults`, `per_round` to a round, each after a pause under
/// `max_delay_ms`. The first `faults.len()` draws are a shuffle of `faults`, so a campaign of
/// at least that many kills injects each kind; the rest are uniform.
pub fn plan(
    seed: u64,
    kills: usize,
    per_round: usize,
    faults: &[Fault],
    max_delay_ms: u64,
) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    let mut deck: Vec<Fault> = faults.to_vec();
    for i in (1..deck.len()).rev() {
        let j = usize::try_from(rng.below(i as u64 + 1)).unwrap_or(0);
        deck.swap(i, j);
    }
    let per_round = per_round.max(1);
    (0..kills)
        .filter_map(|i| {
            let fault = match deck.get(i) {
                Some(f) => *f,
                None => *faults.get(usize::try_from(rng.below(faults.len() as u64)).ok()?)?,
            };
            Some(Step {
                round: i / per_round,
                fault,
                delay_ms: rng.below(max_delay_ms),
            })
        })
        .collect()
}

/// How many rounds a plan needs.
pub fn rounds(plan: &[Step]) -> usize {
    plan.iter().map(|s| s.round + 1).max().unwrap_or(0)
}

/// A seed from the clock, for a campaign started without one (it is printed, so it replays).
pub fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    Rng::new(u64::try_from(nanos & u128::from(u64::MAX)).unwrap_or(0)).next_u64() % 1_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_plan_every_time() {
        let a = plan(42, 25, 3, &Fault::ALL, MAX_DELAY_MS);
        let b = plan(42, 25, 3, &Fault::ALL, MAX_DELAY_MS);
        assert_eq!(a, b);
        assert_eq!(a.len(), 25);
        assert_eq!(rounds(&a), 9);
        assert!(a.iter().all(|s| s.delay_ms < MAX_DELAY_MS));
    }

    #[test]
    fn seeds_differ_and_the_generator_is_pinned() {
        assert_ne!(
            plan(1, 10, 3, &Fault::ALL, 100),
            plan(2, 10, 3, &Fault::ALL, 100)
        );
        // SplitMix64's published first output for seed 0: a change of generator shows here, and
        // would make recorded seeds replay something else.
        assert_eq!(Rng::new(0).next_u64(), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn the_first_draws_cover_every_kind() {
        let p = plan(7, 8, 3, &Fault::ALL, 100);
        assert!(p.iter().all(|s| s.delay_ms < 100));
        let mut kinds: Vec<Fault> = p.iter().map(|s| s.fault).collect();
        kinds.sort();
        assert_eq!(kinds, Fault::ALL.to_vec());
        let only = plan(7, 5, 2, &[Fault::Daemon], 100);
        assert!(only.iter().all(|s| s.fault == Fault::Daemon));
        assert_eq!(rounds(&only), 3);
    }

    #[test]
    fn names_round_trip() {
        for f in Fault::ALL {
            assert_eq!(Fault::parse(f.name()), Some(f));
        }
        assert_eq!(Fault::parse("nope"), None);
    }
}
