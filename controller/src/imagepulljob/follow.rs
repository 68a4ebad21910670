//! Pull-secret copies follow their sources.
//!
//! A job's copy in kruise-daemon-config is rewritten from its source on every reconcile
//! ([`super::secrets::sync`]); what was missing is a reason to reconcile when only the source
//! changed. Upstream watches every Secret of the cluster for that (`secretEventHandler`), which
//! needs `list`/`watch` on all Secrets and caches all of them. Here the manager keeps its
//! cluster-wide Secret access at `get`: while a job that names pull secrets is running, its
//! sources are read by name every [`INTERVAL`] (one GET per distinct source, one LIST of
//! kruise-daemon-config), and a job whose copy no longer matches its source is requeued.
//! Nothing is read while no such job runs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use k8s_openapi::api::core::v1::Secret;
use kruise_api::apps::v1beta1::{ImagePullJob, ReferenceObject};
use kube::api::ListParams;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};

use super::plan::{self, classify_secrets, job_key, referencing_jobs};
use super::secrets::daemon_config_namespace;

/// How often the sources of running jobs are read: a source edit reaches its copy within about
/// this long (plus one reconcile).
pub const INTERVAL: Duration = Duration::from_secs(2);

/// `(job key, source)` → the source's resourceVersion when the job was last requeued for it.
pub type Requeued = BTreeMap<(String, ReferenceObject), String>;

fn followed_by(job: &ImagePullJob, cfg_ns: &str) -> bool {
    plan::is_running(job)
        && !job.spec.template.pull_secrets.is_empty()
        // Jobs in the daemon's namespace use their secrets in place: there is no copy.
        && job.namespace().as_deref() != Some(cfg_ns)
}

/// The source secrets named by running jobs outside `cfg_ns` (each in its job's namespace).
pub fn followed(jobs: &[Arc<ImagePullJob>], cfg_ns: &str) -> BTreeSet<ReferenceObject> {
    jobs.iter()
        .filter(|j| followed_by(j, cfg_ns))
        .flat_map(|j| {
            let ns = j.namespace().unwrap_or_default();
            j.spec
                .template
                .pull_secrets
                .iter()
                .map(move |name| ReferenceObject {
                    namespace: ns.clone(),
                    name: name.clone(),
                    mode: String::new(),
                })
        })
        .collect()
}

fn same_data(copy: &Secret, source: &Secret) -> bool {
    let data = |s: &Secret| s.data.clone().unwrap_or_default();
    let string_data = |s: &Secret| s.string_data.clone().unwrap_or_default();
    data(copy) == data(source) && string_data(copy) == string_data(source)
}

/// The jobs to requeue because a copy they use differs from its source (or they have none yet
/// though the source exists), and the memory for the next round. A job is requeued once per
/// version of a source: if that reconcile fails, its own error policy retries, and this poll
/// does not override the backoff. `sources` holds the followed sources that exist; `copies` is
/// every Secret of kruise-daemon-config.
pub fn resync(
    jobs: &[Arc<ImagePullJob>],
    cfg_ns: &str,
    sources: &BTreeMap<ReferenceObject, Secret>,
    copies: &[Secret],
    requeued: &Requeued,
) -> (Vec<ObjectRef<ImagePullJob>>, Requeued) {
    let mut out = BTreeSet::new();
    let mut memory = Requeued::new();
    for job in jobs.iter().filter(|j| followed_by(j, cfg_ns)) {
        let key = job_key(job);
        for (source_ref, copy) in classify_secrets(job, false, copies).claim {
            let Some(source) = sources.get(&source_ref) else {
                // Missing: nothing to copy; the job is requeued once it appears.
                continue;
            };
            let in_sync = copy
                .as_ref()
                .is_some_and(|c| same_data(c, source) && referencing_jobs(c).contains(&key));
            if in_sync {
                continue;
            }
            let rv = source.resource_version().unwrap_or_default();
            let slot = (key.clone(), source_ref);
            if requeued.get(&slot) != Some(&rv) {
                out.insert((job.namespace().unwrap_or_default(), job.name_any()));
            }
            memory.insert(slot, rv);
        }
    }
    let refs = out
        .into_iter()
        .map(|(ns, name)| ObjectRef::new(&name).within(&ns))
        .collect();
    (refs, memory)
}

/// One round: reads the followed sources and the copies, returns the jobs to requeue.
async fn round(
    client: &Client,
    jobs: &Store<ImagePullJob>,
    requeued: &mut Requeued,
) -> Vec<ObjectRef<ImagePullJob>> {
    let cfg_ns = daemon_config_namespace();
    let all = jobs.state();
    let wanted = followed(&all, &cfg_ns);
    if wanted.is_empty() {
        requeued.clear();
        return Vec::new();
    }
    let mut sources = BTreeMap::new();
    for r in wanted {
        match Api::<Secret>::namespaced(client.clone(), &r.namespace)
            .get_opt(&r.name)
            .await
        {
            Ok(Some(s)) => {
                sources.insert(r, s);
            }
            Ok(None) => {}
            Err(e) => {
                // Unknown this round; the next one looks again.
                tracing::debug!(namespace = %r.namespace, secret = %r.name, error = %e, "cannot read pull secret source");
            }
        }
    }
    let copies = match Api::<Secret>::namespaced(client.clone(), &cfg_ns)
        .list(&ListParams::default())
        .await
    {
        Ok(l) => l.items,
        Err(e) => {
            tracing::debug!(namespace = %cfg_ns, error = %e, "cannot list pull-secret copies");
            return Vec::new();
        }
    };
    let (refs, memory) = resync(&all, &cfg_ns, &sources, &copies, requeued);
    *requeued = memory;
    for r in &refs {
        tracing::info!(job = %r, "pull-secret copy differs from its source; resyncing");
    }
    refs
}

/// Requests for jobs whose pull-secret copies fell behind their sources, every [`INTERVAL`].
pub fn requests(
    client: Client,
    jobs: Store<ImagePullJob>,
) -> impl Stream<Item = ObjectRef<ImagePullJob>> + Send + 'static {
    use futures::StreamExt;
    futures::stream::unfold(
        (client, jobs, Requeued::new()),
        |(client, jobs, mut requeued)| async move {
            tokio::time::sleep(INTERVAL).await;
            let refs = round(&client, &jobs, &mut requeued).await;
            Some((futures::stream::iter(refs), (client, jobs, requeued)))
        },
    )
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kruise_api::apps::v1beta1::{ImagePullJobSpec, ImagePullJobStatus, ImagePullJobTemplate};
    use kruise_api::keys;

    const CFG: &str = "kruise-daemon-config";

    fn job(ns: &str, name: &str, secrets: &[&str]) -> Arc<ImagePullJob> {
        let mut j = ImagePullJob::new(
            name,
            ImagePullJobSpec {
                image: "reg/app:v1".into(),
                template: ImagePullJobTemplate {
                    pull_secrets: secrets.iter().map(|s| s.to_string()).collect(),
                    ..Default::default()
                },
            },
        );
        j.metadata.namespace = Some(ns.into());
        Arc::new(j)
    }

    fn finished(j: &Arc<ImagePullJob>) -> Arc<ImagePullJob> {
        let mut j = (**j).clone();
        j.status = Some(ImagePullJobStatus {
            completion_time: Some(Time(jiff::Timestamp::UNIX_EPOCH)),
            ..Default::default()
        });
        Arc::new(j)
    }

    fn secret(ns: &str, name: &str, rv: &str, token: &str) -> Secret {
        let mut s = Secret::default();
        s.metadata.namespace = Some(ns.into());
        s.metadata.name = Some(name.into());
        s.metadata.resource_version = Some(rv.into());
        s.data = Some([("token".to_string(), ByteString(token.as_bytes().to_vec()))].into());
        s
    }

    fn copy_of(source: &Secret, name: &str, token: &str, refs: &str) -> Secret {
        let mut c = secret(CFG, name, "1", token);
        c.metadata.annotations = Some(
            [
                (
                    keys::IMAGEPULLJOB_SECRET_SOURCE_KEY_ANNOTATION.to_string(),
                    format!(
                        "{}/{}",
                        source.namespace().unwrap_or_default(),
                        source.name_any()
                    ),
                ),
                (
                    keys::IMAGEPULLJOB_SECRET_REFERENCES_ANNOTATION.to_string(),
                    refs.to_string(),
                ),
            ]
            .into(),
        );
        c
    }

    fn src_ref(ns: &str, name: &str) -> ReferenceObject {
        ReferenceObject {
            namespace: ns.into(),
            name: name.into(),
            mode: String::new(),
        }
    }

    fn names(refs: &[ObjectRef<ImagePullJob>]) -> Vec<String> {
        refs.iter()
            .map(|r| format!("{}/{}", r.namespace.clone().unwrap_or_default(), r.name))
            .collect()
    }

    #[test]
    fn followed_sources_are_those_of_running_jobs_outside_the_daemon_namespace() {
        let a = job("a", "j1", &["s1", "s2"]);
        let jobs = vec![
            a.clone(),
            job("a", "j2", &["s1"]),
            finished(&job("b", "done", &["s9"])),
            job(CFG, "local", &["s8"]),
            job("c", "none", &[]),
        ];
        let got: Vec<String> = followed(&jobs, CFG)
            .into_iter()
            .map(|r| format!("{}/{}", r.namespace, r.name))
            .collect();
        assert_eq!(got, vec!["a/s1", "a/s2"]);
        assert!(followed(&[finished(&a)], CFG).is_empty());
    }

    #[test]
    fn resync_table() {
        let j = job("a", "j", &["s1"]);
        let src_v1 = secret("a", "s1", "10", "old");
        let src_v2 = secret("a", "s1", "11", "new");
        let synced = copy_of(&src_v1, "s1-abc", "old", "a/j");
        let not_recorded = copy_of(&src_v1, "s1-abc", "old", "other/x");
        let key = ("a/j".to_string(), src_ref("a", "s1"));
        let remembered_v2: Requeued = [(key.clone(), "11".to_string())].into();
        let remembered_v1: Requeued = [(key.clone(), "10".to_string())].into();

        struct Case<'a> {
            what: &'a str,
            jobs: Vec<Arc<ImagePullJob>>,
            source: Option<&'a Secret>,
            copies: Vec<Secret>,
            memory: &'a Requeued,
            want: Vec<&'a str>,
            want_memory: Vec<&'a str>,
        }
        let none = Requeued::new();
        let cases = [
            Case {
                what: "copy matches its source",
                jobs: vec![j.clone()],
                source: Some(&src_v1),
                copies: vec![synced.clone()],
                memory: &none,
                want: vec![],
                want_memory: vec![],
            },
            Case {
                what: "source data changed: requeue",
                jobs: vec![j.clone()],
                source: Some(&src_v2),
                copies: vec![synced.clone()],
                memory: &none,
                want: vec!["a/j"],
                want_memory: vec!["11"],
            },
            Case {
                what: "already requeued for this version: wait for that reconcile (or its backoff)",
                jobs: vec![j.clone()],
                source: Some(&src_v2),
                copies: vec![synced.clone()],
                memory: &remembered_v2,
                want: vec![],
                want_memory: vec!["11"],
            },
            Case {
                what: "changed again since the last requeue",
                jobs: vec![j.clone()],
                source: Some(&src_v2),
                copies: vec![synced.clone()],
                memory: &remembered_v1,
                want: vec!["a/j"],
                want_memory: vec!["11"],
            },
            Case {
                what: "source exists, no copy yet",
                jobs: vec![j.clone()],
                source: Some(&src_v1),
                copies: vec![],
                memory: &none,
                want: vec!["a/j"],
                want_memory: vec!["10"],
            },
            Case {
                what: "copy does not record the job yet",
                jobs: vec![j.clone()],
                source: Some(&src_v1),
                copies: vec![not_recorded.clone()],
                memory: &none,
                want: vec!["a/j"],
                want_memory: vec!["10"],
            },
            Case {
                what: "source missing: nothing to copy",
                jobs: vec![j.clone()],
                source: None,
                copies: vec![synced.clone()],
                memory: &none,
                want: vec![],
                want_memory: vec![],
            },
            Case {
                what: "finished job: its copy is released, not followed",
                jobs: vec![finished(&j)],
                source: Some(&src_v2),
                copies: vec![synced.clone()],
                memory: &none,
                want: vec![],
                want_memory: vec![],
            },
        ];
        for c in cases {
            let sources: BTreeMap<ReferenceObject, Secret> = c
                .source
                .map(|s| (src_ref("a", "s1"), s.clone()))
                .into_iter()
                .collect();
            let (refs, memory) = resync(&c.jobs, CFG, &sources, &c.copies, c.memory);
            assert_eq!(names(&refs), c.want, "{}", c.what);
            assert_eq!(
                memory.values().map(String::as_str).collect::<Vec<_>>(),
                c.want_memory,
                "{}",
                c.what
            );
        }
    }

    #[test]
    fn one_request_per_job_and_each_job_compared_with_its_own_copy() {
        let j1 = job("a", "j1", &["s1", "s2"]);
        let j2 = job("a", "j2", &["s1"]);
        let s1 = secret("a", "s1", "5", "new");
        let s2 = secret("a", "s2", "6", "new");
        // Both of j1's copies are stale; j2 shares s1's copy, which records both jobs.
        let c1 = copy_of(&s1, "s1-x", "old", "a/j1,a/j2");
        let c2 = copy_of(&s2, "s2-x", "old", "a/j1");
        let sources: BTreeMap<ReferenceObject, Secret> =
            [(src_ref("a", "s1"), s1), (src_ref("a", "s2"), s2)].into();
        let (refs, memory) = resync(&[j1, j2], CFG, &sources, &[c1, c2], &Requeued::new());
        assert_eq!(names(&refs), vec!["a/j1", "a/j2"]);
        assert_eq!(memory.len(), 3);
    }
}
