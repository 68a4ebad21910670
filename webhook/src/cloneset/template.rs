//! The full Pod validation of a CloneSet's template, as upstream gets from
//! `apivalidation.ValidatePodTemplateSpec`: a server-side dry-run create (`dryRun=All`) of the
//! Pod the template describes, whose refusal carries Kubernetes' own messages, mapped back to
//! `spec.template.…` paths.
//!
//! What the dry-run Pod is: the template's labels, annotations, finalizers and spec (what the
//! controller copies into every Pod), a fixed `generateName` so that the CloneSet's own name
//! cannot cause an error, no owner, and each `volumeClaimTemplates` entry mocked in as a
//! `persistentVolumeClaim` volume, as upstream does, so mounts of claims resolve.
//!
//! What counts: only what Kubernetes says about the Pod itself (422 Invalid, 400 when the
//! template does not even decode as a Pod). Upstream validates the template only, so
//! everything that judges the namespace or the cluster rather than the template does not make a
//! CloneSet invalid: ResourceQuota and LimitRange (403), PodSecurity (403), a terminating
//! namespace (403), another component's Pod webhook refusing or failing, missing RBAC. Those
//! are logged and the CloneSet is admitted; its Pods meet them when they are created.
//! When the API server cannot answer (timeout, 5xx, 429), the CloneSet is refused with a
//! message saying so: the webhook fails closed anyway (failurePolicy Fail).
//!
//! Cost: one extra API request per CloneSet CREATE, and per UPDATE that changes the template or
//! the claim templates (an unchanged template was validated when it was written; a change of
//! container images only is checked locally, as that is all Kubernetes checks of them), plus
//! whatever Pod admission webhooks the cluster has (ours only computes the launch priority of
//! an unowned Pod). It can be switched off with [`kruise_api::keys::ENV_WEBHOOK_TEMPLATE_DRY_RUN`].

use std::collections::BTreeSet;
use std::future::Future;

use kube::core::Status;
use kube::core::admission::Operation;
use serde_json::{Map, Value, json};

use super::validation::field_errors;
use crate::field::FieldError;
use crate::json::get;
use crate::review::{Outcome, Request, verdict};

/// `generateName` of every dry-run Pod: valid whatever the CloneSet is called, and telling
/// to anyone reading an audit log or a Pod webhook's log what the request was.
pub const DRY_RUN_GENERATE_NAME: &str = "kruise-template-check-";

/// What the API server made of a dry-run Pod create.
#[derive(Debug, Clone, PartialEq)]
pub enum DryRun {
    /// Created (nothing is stored: dry run).
    Accepted,
    /// Refused with this Status.
    Refused(Box<Status>),
    /// No usable answer (timeout, connection, no client), with why.
    Unavailable(String),
    /// Template dry-runs are switched off.
    Disabled,
}

/// Where the validating handler dry-runs Pods.
pub trait PodDryRun: Sync {
    /// `POST /api/v1/namespaces/{namespace}/pods?dryRun=All` with `pod`.
    fn dry_run_create(&self, namespace: &str, pod: &Value) -> impl Future<Output = DryRun> + Send;
}

/// The dry-run Pod of a CloneSet and how its volumes map back to the CloneSet.
#[derive(Debug, Clone, PartialEq)]
pub struct PodDraft {
    /// The Pod to dry-run.
    pub pod: Value,
    /// How many volumes the template itself has; the mocked claims follow them.
    pub template_volumes: usize,
    /// For each mocked claim volume, the index of its `volumeClaimTemplates` entry.
    pub claims: Vec<usize>,
}

impl PodDraft {
    /// The Pod the controller would create from `cloneset`'s template in `namespace`; `None`
    /// when there is no template spec object to build it from (the local rules report that).
    pub fn from_cloneset(cloneset: &Value, namespace: &str) -> Option<Self> {
        let template = get(cloneset, &["spec", "template"])?;
        let mut spec = template.get("spec")?.as_object()?.clone();
        let mut metadata = Map::new();
        metadata.insert("generateName".into(), json!(DRY_RUN_GENERATE_NAME));
        metadata.insert("namespace".into(), json!(namespace));
        if let Some(m) = template.get("metadata").and_then(Value::as_object) {
            for key in ["labels", "annotations", "finalizers"] {
                if let Some(v) = m.get(key).filter(|v| !v.is_null()) {
                    metadata.insert(key.to_owned(), v.clone());
                }
            }
        }
        // A claim without a name is a local error already; there is nothing to mount.
        let named_claims: Vec<(usize, &str)> = get(cloneset, &["spec", "volumeClaimTemplates"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .filter_map(|(j, pvc)| {
                let name = get(pvc, &["metadata", "name"])?.as_str()?;
                (!name.is_empty()).then_some((j, name))
            })
            .collect();
        if !named_claims.is_empty() && spec.get("volumes").is_none_or(Value::is_null) {
            spec.insert("volumes".into(), json!([]));
        }
        let mut template_volumes = 0;
        let mut claims = Vec::new();
        // A non-list `volumes` is left as it is for the API server to report.
        if let Some(list) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
            template_volumes = list.len();
            for (j, name) in named_claims {
                list.push(json!({"name": name, "persistentVolumeClaim": {"claimName": name}}));
                claims.push(j);
            }
        }
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec});
        Some(Self {
            pod,
            template_volumes,
            claims,
        })
    }

    /// The CloneSet path of a Pod field the API server named.
    pub fn cloneset_path(&self, pod_field: &str) -> String {
        if pod_field.is_empty() {
            return "spec.template".to_owned();
        }
        if let Some(rest) = pod_field.strip_prefix("spec.volumes[")
            && let Some((index, _tail)) = rest.split_once(']')
            && let Ok(index) = index.parse::<usize>()
            && let Some(claim) = index
                .checked_sub(self.template_volumes)
                .and_then(|k| self.claims.get(k))
        {
            // Everything of a mocked volume comes from the claim template's name.
            return format!("spec.volumeClaimTemplates[{claim}].metadata.name");
        }
        format!("spec.template.{pod_field}")
    }
}

/// What a dry-run means for the CloneSet.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Nothing wrong with the template.
    Valid,
    /// The template is not a valid Pod: these errors, on CloneSet paths.
    Invalid(Vec<FieldError>),
    /// Refused for a reason that is not the template's (quota, policy, RBAC, another webhook):
    /// admitted, with why for the log.
    NotJudged(String),
    /// The API server gave no usable answer: refused, with why.
    Unavailable(String),
}

/// Upstream's `admission webhook "…" denied the request` and `failed calling webhook "…"`:
/// another component's Pod policy or outage, not Kubernetes' Pod validation.
fn from_a_webhook(message: &str) -> bool {
    message.contains("admission webhook \"") || message.contains("failed calling webhook")
}

/// Reads the API server's answer to the dry-run of `draft`.
pub fn judge(draft: &PodDraft, outcome: DryRun) -> Verdict {
    let status = match outcome {
        DryRun::Accepted | DryRun::Disabled => return Verdict::Valid,
        DryRun::Unavailable(why) => return Verdict::Unavailable(why),
        DryRun::Refused(status) => status,
    };
    let message = status.message.trim();
    if from_a_webhook(message) {
        return Verdict::NotJudged(message.to_owned());
    }
    match status.code {
        422 => {
            let causes = status
                .details
                .as_ref()
                .map(|d| d.causes.as_slice())
                .unwrap_or_default();
            if causes.is_empty() {
                return Verdict::Invalid(vec![FieldError::reported(
                    "spec.template",
                    strip_pod_prefix(message),
                )]);
            }
            Verdict::Invalid(
                causes
                    .iter()
                    .map(|c| {
                        let detail = if c.message.is_empty() {
                            &c.reason
                        } else {
                            &c.message
                        };
                        FieldError::reported(draft.cloneset_path(&c.field), detail.as_str())
                    })
                    .collect(),
            )
        }
        // The template does not decode as a Pod (a wrongly typed field, a bad quantity).
        400 => Verdict::Invalid(vec![FieldError::reported(
            "spec.template",
            strip_pod_prefix(message),
        )]),
        403 | 404 | 409 | 410 => Verdict::NotJudged(message.to_owned()),
        code => Verdict::Unavailable(format!("HTTP {code}: {message}")),
    }
}

/// `Pod "kruise-template-check-x" is invalid: …` names a Pod the user never wrote.
fn strip_pod_prefix(message: &str) -> &str {
    message
        .strip_prefix("Pod \"")
        .and_then(|rest| rest.split_once("\" is invalid: "))
        .map_or(message, |(_, detail)| detail)
}

/// Whether `req` needs its template dry-run: every CREATE, and an UPDATE that changes the
/// template or the claim templates (an unchanged template was judged when it was written, and
/// re-judging it could block unrelated updates such as removing a finalizer), unless all it
/// changes is container images (see [`only_images_changed`]).
fn template_changed(req: &Request, obj: &Value) -> bool {
    match req.operation {
        Operation::Create => true,
        Operation::Update => {
            let Some(old) = &req.old_object else {
                return true;
            };
            let claims = ["spec", "volumeClaimTemplates"];
            if get(obj, &claims) != get(old, &claims) {
                return true;
            }
            let (new_t, old_t) = (
                get(obj, &["spec", "template"]),
                get(old, &["spec", "template"]),
            );
            new_t != old_t
                && !new_t
                    .zip(old_t)
                    .is_some_and(|(n, o)| only_images_changed(n, o))
        }
        _ => false,
    }
}

/// Whether `new` differs from `old` (both Pod templates) in container and init-container images
/// only, each new image non-empty and without surrounding whitespace. That is the common
/// rollout (`kubectl set image`), and all Kubernetes checks of an image (required, no leading
/// or trailing whitespace): the rest of the template was judged when it was written, so the
/// dry-run (an API request, plus the Pod webhooks it calls, inside this admission) would tell
/// nothing new.
fn only_images_changed(new: &Value, old: &Value) -> bool {
    fn without_images(t: &Value) -> Option<(Value, Vec<Value>)> {
        let mut t = t.clone();
        let mut images = Vec::new();
        for list in ["initContainers", "containers"] {
            let Some(cs) = t.get_mut("spec").and_then(|s| s.get_mut(list)) else {
                continue;
            };
            for c in cs.as_array_mut()? {
                images.push(c.as_object_mut()?.remove("image").unwrap_or(Value::Null));
            }
        }
        Some((t, images))
    }
    let (Some((new_rest, new_images)), Some((old_rest, _))) =
        (without_images(new), without_images(old))
    else {
        return false;
    };
    new_rest == old_rest
        && new_images
            .iter()
            .all(|i| i.as_str().is_some_and(|i| !i.is_empty() && i.trim() == i))
}

/// `/validate-apps-kruise-io-cloneset`: the rules of [`super::validation`], then the dry-run of
/// the Pod template through `cluster`. Every error is reported; where both name the same field,
/// the local message is kept.
pub async fn validate<D: PodDryRun>(req: Request, cluster: &D) -> Outcome {
    let mut errors = match field_errors(&req) {
        Ok(e) => e,
        Err(outcome) => return outcome,
    };
    let Some(obj) = req.object.as_ref() else {
        return verdict(&errors);
    };
    if !template_changed(&req, obj) {
        return verdict(&errors);
    }
    let namespace = req
        .namespace
        .as_deref()
        .or_else(|| get(obj, &["metadata", "namespace"]).and_then(Value::as_str))
        .filter(|ns| !ns.is_empty());
    let Some(namespace) = namespace else {
        return Outcome::bad_request("CloneSet request carries no namespace");
    };
    // Namespaces are DNS labels; anything else would not make a sane URL.
    if !namespace
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Outcome::bad_request(format!("invalid namespace {namespace:?}"));
    }
    let Some(draft) = PodDraft::from_cloneset(obj, namespace) else {
        return verdict(&errors);
    };
    let started = std::time::Instant::now();
    let outcome = cluster.dry_run_create(namespace, &draft.pod).await;
    tracing::debug!(%namespace, name = %req.name, elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
        "CloneSet template dry-run answered");
    match judge(&draft, outcome) {
        Verdict::Valid => {}
        Verdict::Invalid(found) => {
            let known: BTreeSet<String> = errors.iter().map(|e| e.path.clone()).collect();
            errors.extend(found.into_iter().filter(|e| !known.contains(&e.path)));
        }
        Verdict::NotJudged(why) => {
            tracing::info!(%namespace, name = %req.name, reason = %why,
                "CloneSet template dry-run refused for a reason other than the template; admitting as upstream does");
        }
        Verdict::Unavailable(why) if errors.is_empty() => {
            tracing::warn!(%namespace, name = %req.name, reason = %why, "CloneSet template dry-run failed");
            return Outcome::Deny {
                code: 503,
                reason: "ServiceUnavailable",
                message: format!(
                    "spec.template: could not be validated: the API server did not answer the dry-run create of a Pod from the template ({why}); try again"
                ),
            };
        }
        // Already invalid: say what is known rather than that more could not be checked.
        Verdict::Unavailable(_) => {}
    }
    verdict(&errors)
}
