//! Copies of a job's pull secrets in kruise-daemon-config: the daemon may only read secrets
//! there, so the job's secrets are copied over, shared between jobs through the references
//! annotation, and deleted when the last job lets go.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kruise_api::apps::v1beta1::{ImagePullJob, ReferenceObject};
use kruise_api::keys;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};

use super::error::Error;
use super::plan::{self, SecretPlan};

/// The namespace of the copies (env `KRUISE_DAEMON_CONFIG_NS`, as the daemon reads it).
pub fn daemon_config_namespace() -> String {
    std::env::var(keys::ENV_DAEMON_CONFIG_NAMESPACE)
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| keys::KRUISE_DAEMON_CONFIG_NAMESPACE.to_string())
}

/// How long a completed job keeps its pull-secret copies. Upstream releases them at completion,
/// but its daemon reports a pull at most every couple of seconds once its burst is spent, so a
/// job's copy always outlives its creation by seconds (upstream's e2e checks for it once a
/// second). Ours reports within milliseconds: a job for an image already on its nodes would
/// complete, and drop its copy, before anyone could see it. Kept this long after completion,
/// the copy is there for whoever looks, and still gone well within upstream's 10 s.
pub const COPIES_KEPT_AFTER_COMPLETION: Duration = Duration::from_secs(5);

/// How much longer a job completed at `completed` keeps its copies, if at all.
pub fn copies_kept_for(completed: Timestamp, now: Timestamp) -> Option<Duration> {
    let left =
        COPIES_KEPT_AFTER_COMPLETION.saturating_sub(now.duration_since(completed).unsigned_abs());
    (!left.is_zero()).then_some(left)
}

fn random_suffix() -> String {
    use rand::Rng;
    let n: u32 = rand::rng().random_range(0..0x0100_0000);
    format!("{n:06x}")
}

/// Claims copies for a running job and releases the ones it no longer needs (all of them when
/// `finished`). Returns the references to write into NodeImages.
pub async fn sync(
    client: &Client,
    job: &ImagePullJob,
    finished: bool,
) -> Result<Vec<ReferenceObject>, Error> {
    if job.spec.template.pull_secrets.is_empty() && !finished {
        // Nothing to claim; copies left from an edit are released when the job finishes.
        return Ok(Vec::new());
    }
    let cfg_ns = daemon_config_namespace();
    let job_ns = job.namespace().unwrap_or_default();
    if job_ns == cfg_ns {
        // Already where the daemon looks.
        return Ok(job
            .spec
            .template
            .pull_secrets
            .iter()
            .map(|n| ReferenceObject {
                namespace: cfg_ns.clone(),
                name: n.clone(),
                mode: String::new(),
            })
            .collect());
    }
    let ns = match Api::<Namespace>::all(client.clone())
        .get_opt(&cfg_ns)
        .await?
    {
        Some(ns) => ns,
        // Without the namespace there is no copy to release; a running job must wait for it.
        None if finished => return Ok(Vec::new()),
        None => return Err(Error::NamespaceMissing(cfg_ns)),
    };
    if ns.metadata.deletion_timestamp.is_some() {
        return Err(Error::NamespaceTerminating(cfg_ns));
    }
    let copies_api: Api<Secret> = Api::namespaced(client.clone(), &cfg_ns);
    let copies = copies_api.list(&ListParams::default()).await?.items;
    let plan = plan::classify_secrets(job, finished, &copies);
    release(&copies_api, job, &plan).await?;
    claim(client, &copies_api, &cfg_ns, job, plan.claim).await
}

async fn release(api: &Api<Secret>, job: &ImagePullJob, plan: &SecretPlan) -> Result<(), Error> {
    let key = plan::job_key(job);
    for s in &plan.release {
        let mut refs = plan::referencing_jobs(s);
        refs.remove(&key);
        let name = s.name_any();
        if refs.is_empty() {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => tracing::info!(secret = %name, job = %key, "deleted pull-secret copy"),
                Err(kube::Error::Api(e)) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
            continue;
        }
        // Replace (not patch) keeps the resourceVersion precondition: a job that claimed the
        // copy meanwhile makes this conflict instead of being dropped from the list.
        let mut new = s.clone();
        new.annotations_mut().insert(
            keys::IMAGEPULLJOB_SECRET_REFERENCES_ANNOTATION.into(),
            plan::references_value(&refs),
        );
        match api.replace(&name, &PostParams::default(), &new).await {
            Ok(_) => tracing::info!(secret = %name, job = %key, "released pull-secret copy"),
            Err(kube::Error::Api(e)) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

async fn claim(
    client: &Client,
    api: &Api<Secret>,
    cfg_ns: &str,
    job: &ImagePullJob,
    claim: BTreeMap<ReferenceObject, Option<Secret>>,
) -> Result<Vec<ReferenceObject>, Error> {
    let key = plan::job_key(job);
    let mut out = Vec::new();
    for (source_ref, copy) in claim {
        let source = match Api::<Secret>::namespaced(client.clone(), &source_ref.namespace)
            .get_opt(&source_ref.name)
            .await?
        {
            Some(s) => s,
            None => {
                tracing::warn!(job = %key, secret = %source_ref.name, "pull secret not found");
                continue;
            }
        };
        let Some(copy) = copy else {
            let new = plan::new_copy(&source, cfg_ns, &key, &random_suffix());
            let created = api.create(&PostParams::default(), &new).await?;
            tracing::info!(job = %key, secret = %created.name_any(), "created pull-secret copy");
            out.push(ReferenceObject {
                namespace: cfg_ns.to_string(),
                name: created.name_any(),
                mode: ReferenceObject::MODE_BATCH.into(),
            });
            continue;
        };
        out.push(ReferenceObject {
            namespace: cfg_ns.to_string(),
            name: copy.name_any(),
            mode: copy
                .annotations()
                .get(keys::IMAGEPULLJOB_SECRET_MODE_ANNOTATION)
                .cloned()
                .unwrap_or_default(),
        });
        let mut refs = plan::referencing_jobs(&copy);
        refs.insert(key.clone());
        let mut new = copy.clone();
        new.data = source.data.clone();
        new.string_data = source.string_data.clone();
        new.annotations_mut().insert(
            keys::IMAGEPULLJOB_SECRET_REFERENCES_ANNOTATION.into(),
            plan::references_value(&refs),
        );
        if new == copy {
            continue;
        }
        api.replace(&copy.name_any(), &PostParams::default(), &new)
            .await?;
        tracing::info!(job = %key, secret = %copy.name_any(), "updated pull-secret copy");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_jobs_keep_their_copies_a_few_seconds() {
        let done: Timestamp = "2026-01-01T00:00:00Z".parse().expect("ts");
        let at = |s: i64| {
            done.checked_add(jiff::SignedDuration::from_secs(s))
                .expect("ts")
        };
        assert_eq!(
            copies_kept_for(done, at(0)),
            Some(COPIES_KEPT_AFTER_COMPLETION)
        );
        assert_eq!(copies_kept_for(done, at(2)), Some(Duration::from_secs(3)));
        assert_eq!(copies_kept_for(done, at(5)), None);
        assert_eq!(copies_kept_for(done, at(60)), None);
    }
}
