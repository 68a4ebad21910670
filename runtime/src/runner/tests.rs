use super::*;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::runtime::watcher::Event;
use prometheus_client::registry::Registry;

use crate::metrics::ReconcileMetrics;

#[derive(Debug, thiserror::Error)]
enum TestError {
    #[error("needs a spec change")]
    Spec,
    #[error("conflict")]
    Conflict,
}

impl ReconcileError for TestError {
    fn metric_label(&self) -> &'static str {
        match self {
            TestError::Spec => "spec",
            TestError::Conflict => "conflict",
        }
    }
    fn retry_floor(&self) -> Duration {
        match self {
            TestError::Spec => SPEC_FLOOR,
            TestError::Conflict => Duration::ZERO,
        }
    }
    fn is_conflict(&self) -> bool {
        matches!(self, TestError::Conflict)
    }
}

const SPEC_FLOOR: Duration = Duration::from_millis(50);

/// The runner's metrics in a registry shaped like the manager's, and a way to read it back.
fn metrics() -> (Arc<ReconcileMetrics>, impl Fn() -> String) {
    let mut registry = Registry::with_prefix("kruise_manager");
    let m = Arc::new(ReconcileMetrics::register(&mut registry));
    let encode = move || {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
        out
    };
    (m, encode)
}

fn cm(ns: Option<&str>, name: &str, uid: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.namespace = ns.map(str::to_string);
    cm.metadata.name = Some(name.into());
    cm.metadata.uid = Some(uid.into());
    cm
}

/// One reconcile as the test saw it: when, and the failures the shared backoff held.
struct Call {
    at: Instant,
    failures: u32,
}

struct Ctx {
    backoff: Arc<Backoff>,
    calls: Mutex<Vec<Call>>,
    done: futures::channel::mpsc::UnboundedSender<usize>,
}

async fn reconcile(obj: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, TestError> {
    let n = {
        let mut calls = ctx.calls.lock().expect("lock");
        calls.push(Call {
            at: Instant::now(),
            failures: ctx.backoff.failures(&backoff::key_of(obj.as_ref())),
        });
        calls.len()
    };
    let _ = ctx.done.unbounded_send(n);
    match n {
        1 => Err(TestError::Spec),
        2 => Err(TestError::Conflict),
        _ => Ok(Action::await_change()),
    }
}

/// The runtime of a test: one thread, so its tasks interleave the same way on every run.
fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A store that someone else filled with `obj`, and a context that reports each call.
fn store_and_ctx(
    obj: &ConfigMap,
) -> (
    Store<ConfigMap>,
    Arc<Ctx>,
    futures::channel::mpsc::UnboundedReceiver<usize>,
) {
    let (store, mut writer) = reflector::store::<ConfigMap>();
    writer.apply_watcher_event(&Event::Init);
    writer.apply_watcher_event(&Event::InitApply(obj.clone()));
    writer.apply_watcher_event(&Event::InitDone);
    let (done_tx, done_rx) = futures::channel::mpsc::unbounded::<usize>();
    let ctx = Arc::new(Ctx {
        backoff: Arc::new(Backoff::default()),
        calls: Mutex::default(),
        done: done_tx,
    });
    (store, ctx, done_rx)
}

/// The CloneSet wiring: own watch with an inspect hook, a foreign trigger stream, concurrency
/// 3, a retry floor for spec errors and the backoff shared with the context.
#[test]
fn cloneset_shape() {
    let rt = current_thread();
    rt.block_on(async {
        let (metrics, encode) = metrics();
        let shutdown = CancellationToken::new();
        let backoff = Arc::new(Backoff::default());
        let (own_tx, own_rx) = futures::channel::mpsc::unbounded::<Event<ConfigMap>>();
        let (pod_tx, pod_rx) = futures::channel::mpsc::unbounded::<ObjectRef<ConfigMap>>();
        let (deleted_tx, mut deleted_rx) = futures::channel::mpsc::unbounded::<String>();
        let (done_tx, mut done_rx) = futures::channel::mpsc::unbounded::<usize>();
        let ctx = Arc::new(Ctx {
            backoff: backoff.clone(),
            calls: Mutex::default(),
            done: done_tx,
        });

        let ctl = Controller::watching(
            "test",
            own_rx.map(Ok::<_, watcher::Error>),
            metrics.clone(),
            shutdown.clone(),
        )
        .concurrency(3)
        .backoff(backoff.clone());
        let store = ctl.store();
        let ctl = ctl
            .inspect(move |ev| {
                if let Ok(Event::Delete(o)) = ev {
                    // The hook runs after the store applied the event.
                    assert!(store.get(&ObjectRef::from_obj(o)).is_none());
                    let _ = deleted_tx.unbounded_send(o.name_any());
                }
            })
            .trigger_refs(pod_rx);

        let a = cm(Some("ns"), "a", "ua");
        let driver = async {
            for ev in [Event::Init, Event::InitApply(a.clone()), Event::InitDone] {
                own_tx.unbounded_send(ev).expect("send");
            }
            // 1: spec error, retried no sooner than its floor; 2: conflict, retried on the
            // curve (second failure); 3: success.
            assert_eq!(done_rx.next().await, Some(1));
            assert_eq!(done_rx.next().await, Some(2));
            assert_eq!(done_rx.next().await, Some(3));
            // A foreign event triggers the object again.
            pod_tx
                .unbounded_send(ObjectRef::new("a").within("ns"))
                .expect("send");
            assert_eq!(done_rx.next().await, Some(4));
            own_tx
                .unbounded_send(Event::Delete(a.clone()))
                .expect("send");
            assert_eq!(deleted_rx.next().await.as_deref(), Some("a"));
            shutdown.cancel();
        };
        tokio::join!(ctl.run(reconcile, ctx.clone()), driver);

        let calls = ctx.calls.lock().expect("lock");
        let failures: Vec<u32> = calls.iter().map(|c| c.failures).collect();
        assert_eq!(failures, [0, 1, 2, 0]);
        assert!(calls[1].at - calls[0].at >= SPEC_FLOOR);
        assert_eq!(backoff.failures("ua"), 0);
        let text = encode();
        assert!(text.contains("kruise_manager_reconciles_total{controller=\"test\"} 4"));
        for label in ["spec", "conflict"] {
            assert!(text.contains(&format!(
                "kruise_manager_reconcile_errors_total{{controller=\"test\",error=\"{label}\"}} 1"
            )));
        }
    });
}

/// The launch-priority / pod-readiness wiring: a store filled elsewhere, objects queued by a
/// trigger, and the run ends at shutdown even while the trigger stream stays open.
#[test]
fn on_store_reconciles_triggered_objects_until_shutdown() {
    let rt = current_thread();
    rt.block_on(async {
        let b = cm(None, "b", "ub");
        let (store, ctx, mut done_rx) = store_and_ctx(&b);
        let (metrics, encode) = metrics();
        let shutdown = CancellationToken::new();
        let (tx, rx) = futures::channel::mpsc::unbounded::<ObjectRef<ConfigMap>>();
        let ctl = Controller::on_store("store", store, metrics.clone(), shutdown.clone())
            .trigger_refs(rx);
        let driver = async {
            // Calls 1 and 2 fail and are requeued by the runner, 3 succeeds.
            tx.unbounded_send(ObjectRef::from_obj(&b)).expect("send");
            for n in 1..=3 {
                assert_eq!(done_rx.next().await, Some(n));
            }
            shutdown.cancel();
        };
        tokio::join!(ctl.run(reconcile, ctx), driver);
        let text = encode();
        assert!(text.contains("kruise_manager_reconciles_total{controller=\"store\"} 3"));
        drop(tx);
    });
}

/// The controller runs on a task of its own, but dropping `run` (a lost lease drops the
/// controllers' future) still stops it: its trigger stream and its context are released.
#[test]
fn a_dropped_run_stops_its_controller() {
    let rt = current_thread();
    rt.block_on(async {
        let b = cm(None, "b", "ub");
        let (store, ctx, mut done_rx) = store_and_ctx(&b);
        let (metrics, _) = metrics();
        let (tx, rx) = futures::channel::mpsc::unbounded::<ObjectRef<ConfigMap>>();
        let ctl = Controller::on_store("dropped", store, metrics, CancellationToken::new())
            .trigger_refs(rx);
        tx.unbounded_send(ObjectRef::from_obj(&b)).expect("send");
        tokio::select! {
            _ = ctl.run(reconcile, ctx) => panic!("the run ended without a shutdown"),
            first = done_rx.next() => assert_eq!(first, Some(1)),
        }
        // The run is dropped: its task ends, and with it the only holder of the context.
        let rest = tokio::time::timeout(Duration::from_secs(5), done_rx.next()).await;
        assert_eq!(
            rest,
            Ok(None),
            "no reconcile after the drop, the context released"
        );
        assert!(tx.is_closed(), "the trigger stream is released");
    });
}

#[test]
fn object_keys() {
    assert_eq!(object_key(&cm(Some("ns"), "a", "u")), "ns/a");
    assert_eq!(object_key(&cm(None, "node-1", "u")), "node-1");
}

#[test]
fn kube_conflicts() {
    let api = |code: u16| {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            ..Default::default()
        }))
    };
    assert!(is_conflict(&api(409)));
    assert!(!is_conflict(&api(404)));
}
