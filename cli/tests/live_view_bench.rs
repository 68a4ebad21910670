//! Runs the live-view benchmark's scene and measurement small, so `cargo test` keeps the bench
//! target honest (a `harness = false` bench has no tests of its own).

#[path = "../benches/live_view/measure.rs"]
mod measure;

use kubectl_kruise::view::PodView;
use measure::{Args, OLD_REV, bench, pod};

#[test]
fn pods_have_every_state() {
    let views: Vec<PodView> = (0..5)
        .map(|i| PodView::from_pod(&pod(i, 1).expect("pod")))
        .collect();
    assert!(views[0].inplace.is_none() && views[0].revision == OLD_REV);
    assert!(views[1].inplace.is_some() && !views[1].in_place_in_progress());
    assert!(views[2].in_place_in_progress());
    assert_eq!(views[3].inplace.as_ref().map(|i| i.grace_seconds), Some(30));
    assert!(views[4].terminating);
}

#[test]
fn runs_small() {
    let out = bench(&Args {
        pods: 20,
        iterations: 3,
    })
    .expect("bench");
    assert!(out.contains("full frame render, 200x60"), "{out}");
}

#[test]
fn every_pod_reaches_the_model() {
    let out = bench(&Args {
        pods: 7,
        iterations: 2,
    })
    .expect("bench");
    assert!(
        out.contains("model rebuild per Pod event (7 Pods, 1 changed)"),
        "{out}"
    );
}
