//! The campaign's table (fault × workload: injected / survived / broken) and, on failure, what
//! replays it: the seed, the faults as injected, each broken invariant and the history around it.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::campaign::Outcome;
use super::history::PodObs;
use super::invariants::Violation;
use super::schedule::Fault;
use super::workloads::{WORKLOADS, column_of};

/// Short column headings, in [`WORKLOADS`] order.
const HEADINGS: &[&str] = &[
    "CS",
    "ASTS",
    "ADS",
    "CS+PUB+WS",
    "Sidecar",
    "UD",
    "BJob",
    "ACJ",
    "EJob",
    "CRR",
    "IPJ",
];

/// The round a moment falls in (the last round for anything after it).
fn round_of(o: &Outcome, t_ms: u64) -> usize {
    o.rounds
        .iter()
        .position(|r| t_ms <= r.end_ms)
        .unwrap_or(o.rounds.len().saturating_sub(1))
}

/// Cells `(injected, survived, broken)` per fault and column: a fault injected in a round
/// counts for every workload rolling in that round; the workload survived it when the round
/// broke no invariant of that workload and its rollout completed.
pub fn cells(o: &Outcome) -> BTreeMap<(Fault, &'static str), (usize, usize, usize)> {
    let mut broken_in: BTreeMap<(usize, &str), bool> = BTreeMap::new();
    for v in &o.violations {
        if let Some(col) = column_of(&v.subject) {
            broken_in.insert((round_of(o, v.t_ms), col), true);
        }
    }
    let mut out = BTreeMap::new();
    for i in &o.injections {
        for (col, _) in WORKLOADS {
            let c = out.entry((i.fault, *col)).or_insert((0, 0, 0));
            c.0 += 1;
            if broken_in.contains_key(&(i.round, *col)) {
                c.2 += 1;
            } else {
                c.1 += 1;
            }
        }
    }
    out
}

/// The table, one row a fault kind injected, with how many of its injections the cluster
/// repaired.
pub fn table(o: &Outcome) -> String {
    let cells = cells(o);
    let mut s = String::new();
    let _ = write!(s, "{:<16} {:>8}", "fault", "repaired");
    for h in HEADINGS {
        let _ = write!(s, " {h:>9}");
    }
    s.push('\n');
    for f in Fault::ALL {
        let of: Vec<_> = o.injections.iter().filter(|i| i.fault == f).collect();
        if of.is_empty() {
            continue;
        }
        let repaired = of.iter().filter(|i| i.repaired_ms.is_some()).count();
        let _ = write!(
            s,
            "{:<16} {:>8}",
            f.name(),
            format!("{repaired}/{}", of.len())
        );
        for (col, _) in WORKLOADS {
            let (i, ok, bad) = cells.get(&(f, *col)).copied().unwrap_or_default();
            let _ = write!(s, " {:>9}", format!("{i}/{ok}/{bad}"));
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "cells: injected/survived/broken (a fault counts for every workload rolling in its round); \
         {} faults in {} rounds, {} watch errors resumed",
        o.injections.len(),
        o.rounds.len(),
        o.history.watch_errors
    );
    s
}

fn pod_line(p: &PodObs) -> String {
    let cs: Vec<String> = p
        .containers
        .iter()
        .map(|c| {
            let id =
                c.id.rsplit('/')
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(12)
                    .collect::<String>();
            let img = c.spec_image.rsplit('/').next().unwrap_or("");
            format!("{}={img}#{}@{id}", c.name, c.restarts)
        })
        .collect();
    format!(
        "{:>8}ms {:<28} uid={} slot={} {}{}{} {}",
        p.t_ms,
        p.name,
        p.uid.get(..8).unwrap_or(&p.uid),
        p.slot,
        if p.ready { "ready" } else { "unready" },
        if p.terminating { " terminating" } else { "" },
        if p.deleted { " DELETED" } else { "" },
        cs.join(" ")
    )
}

/// The history of one violation's owner: its Pods' observations, or its objects'.
fn history_of(o: &Outcome, v: &Violation, out: &mut String) {
    // What led up to it: the owner's observations of the half minute before, and just after.
    let window = v.t_ms.saturating_sub(30_000)..=v.t_ms + 5_000;
    let pods: Vec<&PodObs> = o
        .history
        .pods
        .iter()
        .filter(|p| p.owner == v.subject && window.contains(&p.t_ms))
        .collect();
    for p in pods.iter().rev().take(80).rev() {
        let _ = writeln!(out, "    {}", pod_line(p));
    }
    let name = v.subject.split('/').nth(1).unwrap_or("");
    for x in o
        .history
        .objects
        .iter()
        .filter(|x| !name.is_empty() && (x.owner == v.subject || x.name == name))
        .take(40)
    {
        let _ = writeln!(
            out,
            "    {:>8}ms {} {} uid={} {}",
            x.t_ms, x.kind, x.name, x.uid, x.status
        );
    }
}

/// What a failed campaign prints: the seed to replay, the faults as injected, each broken
/// invariant with the history of what it is about.
pub fn failure(o: &Outcome) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "CAMPAIGN FAILED: seed {} kills {} (replay: make chaos SEED={} KILLS={}); namespace {} kept",
        o.seed, o.kills, o.seed, o.kills, o.namespace
    );
    let _ = writeln!(s, "faults as injected:");
    for i in &o.injections {
        let what = match &i.outcome {
            Ok(w) => w.clone(),
            Err(e) => format!("FAILED: {e}"),
        };
        let _ = writeln!(s, "  round {} at {}ms {}: {what}", i.round, i.t_ms, i.fault);
    }
    for r in o
        .rounds
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.incomplete.is_empty())
    {
        let _ = writeln!(s, "  round {} incomplete: {:?}", r.0, r.1.incomplete);
    }
    for v in &o.violations {
        let _ = writeln!(
            s,
            "INVARIANT BROKEN: {} — {} at {}ms: {}",
            v.invariant, v.subject, v.t_ms, v.detail
        );
        history_of(o, v, &mut s);
    }
    s
}
