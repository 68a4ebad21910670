//! SidecarSet injection at Pod creation (upstream `sidecarsetMutatingPod` / `buildSidecars`
//! in `pkg/webhook/pod/mutating/sidecarset.go`). Pure: the SidecarSets and the namespace's
//! labels are read by the caller.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, LocalObjectReference, ObjectFieldSelector, Pod, PodSpec,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1beta1::{PodInjectPolicyType, SidecarContainer, SidecarSet};
use kruise_api::keys;
use kruise_api::sidecarset::{self as wire, SidecarSetUpgradeSpec};

use super::resources::{self, PolicyError};

/// What injection reads besides the Pod.
#[derive(Debug, Clone, Default)]
pub struct InjectContext {
    /// Every SidecarSet in the cluster (shared with the cache; a pinned revision replaces its
    /// entry with the restored set).
    pub sidecar_sets: Vec<Arc<SidecarSet>>,
    /// Labels of the Pod's namespace (for `namespaceSelector`).
    pub namespace_labels: BTreeMap<String, String>,
    /// SidecarSet name → the ControllerRevision its entry in `sidecar_sets` was restored from
    /// (`injectionStrategy.revision`), recorded in the Pod's hash entry.
    pub revisions: BTreeMap<String, String>,
    /// Gate `EnableSortSidecarContainerByName`: the injected containers in name order (before
    /// and after the Pod's own as each one's podInjectPolicy says).
    pub sort_containers_by_name: bool,
}

/// Why a Pod could not be injected.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// The Pod carries a hash annotation that is not the JSON upstream writes.
    #[error("pod annotation: {0}")]
    Annotation(#[from] kruise_api::Error),
    /// A sidecar's `resourcesPolicy` cannot be applied to the Pod.
    #[error("SidecarSet {set} container {container}: resourcesPolicy: {source}")]
    ResourcesPolicy {
        set: String,
        container: String,
        source: Box<PolicyError>,
    },
}

/// The SidecarSets that inject into `pod`, by name (upstream lists them in name order too).
pub fn matching<'a>(pod: &Pod, ctx: &'a InjectContext) -> Vec<&'a SidecarSet> {
    let mut out: Vec<&SidecarSet> = ctx
        .sidecar_sets
        .iter()
        .map(|s| &**s)
        .filter(|s| !s.spec.injection_strategy.paused)
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .filter(|s| wire::selects_pod(&s.spec, pod, &ctx.namespace_labels))
        .collect();
    out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    out
}

/// Injects every matching SidecarSet into `pod`; returns whether anything changed.
pub fn inject(pod: &mut Pod, ctx: &InjectContext, now: &Time) -> Result<bool, InjectError> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Ok(false);
    }
    let sets = matching(pod, ctx);
    if sets.is_empty() {
        return Ok(false);
    }
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let read = |key: &'static str| match annotations.get(key) {
        Some(v) => wire::parse_hash_annotation(key, v),
        None => Ok(BTreeMap::new()),
    };
    let mut hashes = read(keys::SIDECARSET_HASH_ANNOTATION)?;
    let mut hashes_without_image = read(keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION)?;
    let mut injection = Injection {
        working: match annotations.get(keys::SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION) {
            Some(v) => wire::parse_working_containers(v)?,
            None => BTreeMap::new(),
        },
        ..Injection::default()
    };
    let mut names = Vec::new();
    let pod_spec = pod.spec.clone().unwrap_or_default();
    // Never targets of a resourcesPolicy: what any matching SidecarSet injects.
    injection.kruise_sidecars = sets
        .iter()
        .flat_map(|s| s.spec.init_containers.iter().chain(&s.spec.containers))
        .map(|c| c.container.name.clone())
        .collect();

    for set in &sets {
        let name = set.metadata.name.clone().unwrap_or_default();
        names.push(name.clone());
        let sidecar_list = injection.add_set(set, pod, &pod_spec)?;
        let entry = |hash: String| SidecarSetUpgradeSpec {
            update_timestamp: now.clone(),
            hash,
            sidecar_set_name: name.clone(),
            sidecar_list: sidecar_list.iter().cloned().collect(),
            controller_revision: ctx.revisions.get(&name).cloned().unwrap_or_default(),
        };
        hashes.insert(
            name.clone(),
            entry(wire::current_hash(set, keys::SIDECARSET_HASH_ANNOTATION)?),
        );
        hashes_without_image.insert(
            name.clone(),
            entry(wire::current_hash(
                set,
                keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION,
            )?),
        );
        patch_metadata(set, &annotations, &mut injection.annotations);
    }
    if injection.init_containers.is_empty() && injection.containers.is_empty() {
        return Ok(false);
    }
    let injected_annotations = &mut injection.annotations;
    injected_annotations.insert(
        keys::SIDECARSET_HASH_ANNOTATION.to_owned(),
        wire::format_hash_annotation(&hashes)?,
    );
    injected_annotations.insert(
        keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION.to_owned(),
        wire::format_hash_annotation(&hashes_without_image)?,
    );
    injected_annotations.insert(
        keys::SIDECARSET_INJECTED_LIST_ANNOTATION.to_owned(),
        names.join(","),
    );
    if !injection.working.is_empty() {
        injected_annotations.insert(
            keys::SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION.to_owned(),
            wire::format_working_containers(&injection.working)?,
        );
    }
    injection.apply(pod, ctx.sort_containers_by_name);
    Ok(true)
}

/// What the matching SidecarSets add to a Pod, gathered before any of it is applied.
#[derive(Default)]
struct Injection {
    init_containers: Vec<(PodInjectPolicyType, Container)>,
    containers: Vec<(PodInjectPolicyType, Container)>,
    volumes: Vec<Volume>,
    secrets: Vec<LocalObjectReference>,
    annotations: BTreeMap<String, String>,
    /// Hot-upgrade sidecar → its working container.
    working: BTreeMap<String, String>,
    /// Names of every container the matching SidecarSets inject.
    kruise_sidecars: BTreeSet<String>,
}

impl Injection {
    /// Gathers what `set` injects into `pod`; returns the names of its sidecar containers.
    fn add_set(
        &mut self,
        set: &SidecarSet,
        pod: &Pod,
        pod_spec: &PodSpec,
    ) -> Result<BTreeSet<String>, InjectError> {
        let set_volumes: BTreeMap<&str, &Volume> = set
            .spec
            .volumes
            .iter()
            .map(|v| (v.name.as_str(), v))
            .collect();
        for ic in &set.spec.init_containers {
            let mut c = ic.container.clone();
            self.apply_resources_policy(set, ic, pod, &mut c)?;
            push_env(&mut c, injected_env());
            for e in transfer_envs(ic, pod) {
                push_env(&mut c, e);
            }
            add_volumes_of(&c, &set_volumes, &mut self.volumes);
            // Unset (a SidecarSet stored before defaulting) goes after, as upstream's
            // `mergeSidecarContainers` puts any other value.
            let policy = ic
                .pod_inject_policy
                .unwrap_or(PodInjectPolicyType::AfterAppContainer);
            self.init_containers.push((policy, c));
        }
        self.secrets
            .extend(set.spec.image_pull_secrets.iter().cloned());

        let mut sidecar_list = BTreeSet::new();
        for sc in &set.spec.containers {
            sidecar_list.insert(sc.container.name.clone());
            let mut c = sc.container.clone();
            self.apply_resources_policy(set, sc, pod, &mut c)?;
            add_volumes_of(&c, &set_volumes, &mut self.volumes);
            let (mounts, mount_envs) = shared_mounts(sc, &pod_spec.containers);
            merge_mounts(&mut c, mounts);
            push_env(&mut c, injected_env());
            for e in transfer_envs(sc, pod).into_iter().chain(mount_envs) {
                push_env(&mut c, e);
            }
            let policy = sc.pod_inject_policy.unwrap_or_default();
            if sc.is_hot_upgrade() {
                self.add_hot_upgrade(sc, c, policy);
            } else {
                self.containers.push((policy, c));
            }
        }
        Ok(sidecar_list)
    }

    /// The resources `sc.resourcesPolicy` computes from the Pod as it was created (upstream
    /// applies it at creation only, before anything is injected).
    fn apply_resources_policy(
        &self,
        set: &SidecarSet,
        sc: &SidecarContainer,
        pod: &Pod,
        c: &mut Container,
    ) -> Result<(), InjectError> {
        let Some(policy) = &sc.resources_policy else {
            return Ok(());
        };
        let r = resources::compute(policy, pod, &self.kruise_sidecars).map_err(|source| {
            InjectError::ResourcesPolicy {
                set: set.metadata.name.clone().unwrap_or_default(),
                container: c.name.clone(),
                source: Box::new(source),
            }
        })?;
        c.resources = Some(r);
        Ok(())
    }

    /// A hot-upgrade sidecar `c` as its two containers, the first one working.
    fn add_hot_upgrade(
        &mut self,
        sc: &SidecarContainer,
        c: Container,
        policy: PodInjectPolicyType,
    ) {
        let (first, second) = wire::hot_upgrade_container_names(&c.name);
        for (n, image, version, alt) in [
            (&first, c.image.clone(), "1", "0"),
            (
                &second,
                Some(sc.upgrade_strategy.hot_upgrade_empty_image.clone()),
                "0",
                "1",
            ),
        ] {
            let mut hc = c.clone();
            hc.name = n.clone();
            hc.image = image;
            push_env(
                &mut hc,
                field_env(keys::ENV_SIDECARSET_VERSION, &version_key(n)),
            );
            push_env(
                &mut hc,
                field_env(keys::ENV_SIDECARSET_VERSION_ALT, &alt_key(n)),
            );
            self.annotations.insert(version_key(n), version.to_owned());
            self.annotations.insert(alt_key(n), alt.to_owned());
            self.containers.push((policy, hc));
        }
        self.working.insert(c.name.clone(), first);
    }

    /// Writes what was gathered into `pod`.
    fn apply(mut self, pod: &mut Pod, sort_containers_by_name: bool) {
        let spec = pod.spec.get_or_insert_with(Default::default);
        // 1. init containers, by name, before or after the Pod's own as their podInjectPolicy
        // says (defaulted to AfterAppContainer).
        let mut init_containers = self.init_containers;
        init_containers.sort_by(|a, b| a.1.name.cmp(&b.1.name));
        let own_inits = spec.init_containers.take().unwrap_or_default();
        let mut before_inits = Vec::new();
        let mut after_inits = Vec::new();
        for (policy, c) in init_containers {
            if own_inits.iter().any(|p| p.name == c.name) {
                continue;
            }
            match policy {
                PodInjectPolicyType::BeforeAppContainer => before_inits.push(c),
                PodInjectPolicyType::AfterAppContainer => after_inits.push(c),
            }
        }
        let inits: Vec<Container> = before_inits
            .into_iter()
            .chain(own_inits)
            .chain(after_inits)
            .collect();
        spec.init_containers = (!inits.is_empty()).then_some(inits);
        // 2. containers: a sidecar the Pod already names replaces it in place; the others go
        // before or after the Pod's own, in SidecarSet order or (gate) by name.
        if sort_containers_by_name {
            self.containers.sort_by(|a, b| a.1.name.cmp(&b.1.name));
        }
        let mut before = Vec::new();
        let mut after = Vec::new();
        for (policy, c) in self.containers {
            if let Some(existing) = spec.containers.iter_mut().find(|p| p.name == c.name) {
                *existing = c;
                continue;
            }
            match policy {
                PodInjectPolicyType::BeforeAppContainer => before.push(c),
                PodInjectPolicyType::AfterAppContainer => after.push(c),
            }
        }
        let own = std::mem::take(&mut spec.containers);
        spec.containers = before.into_iter().chain(own).chain(after).collect();
        // 3. volumes the Pod does not have yet (the Pod's own wins).
        let pod_volumes = spec.volumes.get_or_insert_with(Vec::new);
        for v in self.volumes {
            if !pod_volumes.iter().any(|p| p.name == v.name) {
                pod_volumes.push(v);
            }
        }
        if pod_volumes.is_empty() {
            spec.volumes = None;
        }
        // 4. image pull secrets, once each.
        if !self.secrets.is_empty() {
            let pod_secrets = spec.image_pull_secrets.get_or_insert_with(Vec::new);
            for s in self.secrets {
                if !pod_secrets.iter().any(|p| p.name == s.name) {
                    pod_secrets.push(s);
                }
            }
        }
        // 5. annotations.
        pod.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .extend(self.annotations);
    }
}

fn version_key(container: &str) -> String {
    format!("{}{container}", keys::SIDECARSET_VERSION_ANNOTATION_PREFIX)
}

fn alt_key(container: &str) -> String {
    format!(
        "{}{container}",
        keys::SIDECARSET_VERSION_ALT_ANNOTATION_PREFIX
    )
}

fn field_env(name: &str, annotation: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: format!("metadata.annotations['{annotation}']"),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn injected_env() -> EnvVar {
    EnvVar {
        name: keys::ENV_SIDECAR_IS_INJECTED.to_owned(),
        value: Some("true".to_owned()),
        ..Default::default()
    }
}

/// Appends `e` unless the container already has an env of that name (upstream `MergeEnvVar`
/// keeps the container's own).
fn push_env(c: &mut Container, e: EnvVar) {
    let env = c.env.get_or_insert_with(Vec::new);
    if !env.iter().any(|x| x.name == e.name) {
        env.push(e);
    }
}

fn add_volumes_of(c: &Container, set_volumes: &BTreeMap<&str, &Volume>, out: &mut Vec<Volume>) {
    for m in c.volume_mounts.iter().flatten() {
        if let Some(v) = set_volumes.get(m.name.as_str())
            && !out.iter().any(|o| o.name == v.name)
        {
            out.push((*v).clone());
        }
    }
}

/// Env vars copied from the Pod's containers (upstream `GetSidecarTransferEnvs`); a missing
/// source is skipped, as upstream does.
fn transfer_envs(sc: &SidecarContainer, pod: &Pod) -> Vec<EnvVar> {
    let containers = pod.spec.as_ref().map(|s| &s.containers[..]).unwrap_or(&[]);
    let mut out = Vec::new();
    for t in &sc.transfer_env {
        let source = if t.source_container_name.is_empty() {
            t.source_container_name_from
                .as_ref()
                .and_then(|f| f.field_ref.as_ref())
                .and_then(|f| pod_field(pod, &f.field_path))
        } else {
            Some(t.source_container_name.clone())
        };
        let Some(source) = source else { continue };
        let Some(c) = containers.iter().find(|c| c.name == source) else {
            continue;
        };
        let wanted: Vec<&str> = if t.env_names.is_empty() {
            vec![t.env_name.as_str()]
        } else {
            t.env_names.iter().map(String::as_str).collect()
        };
        for name in wanted {
            if let Some(e) = c.env.iter().flatten().find(|e| e.name == name) {
                out.push(e.clone());
            }
        }
    }
    out
}

/// `metadata.name`, `metadata.labels['k']` or `metadata.annotations['k']` of the Pod.
fn pod_field(pod: &Pod, path: &str) -> Option<String> {
    if path == "metadata.name" {
        return pod.metadata.name.clone();
    }
    let sub = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|r| r.strip_suffix("']"))
            .map(str::to_owned)
    };
    if let Some(k) = sub("metadata.labels['") {
        return pod.metadata.labels.as_ref()?.get(&k).cloned();
    }
    if let Some(k) = sub("metadata.annotations['") {
        return pod.metadata.annotations.as_ref()?.get(&k).cloned();
    }
    None
}

/// With `shareVolumePolicy: enabled`, the Pod containers' mounts (not other sidecars', not
/// service-account tokens) and the env their `subPathExpr` needs (upstream
/// `GetInjectedVolumeMountsAndEnvs`).
fn shared_mounts(sc: &SidecarContainer, app: &[Container]) -> (Vec<VolumeMount>, Vec<EnvVar>) {
    if !sc.share_volume_policy.enabled() {
        return (Vec::new(), Vec::new());
    }
    let mut mounts = Vec::new();
    let mut envs = Vec::new();
    for c in app {
        let injected =
            c.env.iter().flatten().any(|e| {
                e.name == keys::ENV_SIDECAR_IS_INJECTED && e.value.as_deref() == Some("true")
            });
        if injected {
            continue;
        }
        for m in c.volume_mounts.iter().flatten() {
            if m.mount_path.starts_with("/var/run/secrets/kubernetes.io") {
                continue;
            }
            mounts.push(m.clone());
            for var in subpath_vars(m.sub_path_expr.as_deref().unwrap_or_default()) {
                if let Some(e) = c.env.iter().flatten().find(|e| e.name == var) {
                    envs.push(e.clone());
                }
            }
        }
    }
    (mounts, envs)
}

/// `$(NAME)` references in a subPathExpr.
fn subpath_vars(expr: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(start) = rest.find("$(") {
        let after = &rest[start + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(&after[..end]);
        rest = &after[end + 1..];
    }
    out
}

/// The sidecar's own mounts win over shared ones of the same name or path (upstream
/// `MergeVolumeMounts`).
fn merge_mounts(c: &mut Container, shared: Vec<VolumeMount>) {
    if shared.is_empty() {
        return;
    }
    let own = c.volume_mounts.get_or_insert_with(Vec::new);
    for m in shared {
        if !own
            .iter()
            .any(|o| o.name == m.name || o.mount_path == m.mount_path)
        {
            own.push(m);
        }
    }
}

/// `patchPodMetadata` at injection: Retain keeps a value the Pod has, Overwrite replaces it,
/// MergePatchJson merges JSON objects.
fn patch_metadata(
    set: &SidecarSet,
    pod_annotations: &BTreeMap<String, String>,
    out: &mut BTreeMap<String, String>,
) {
    use kruise_api::apps::v1beta1::SidecarSetPatchPolicyType as P;
    for p in &set.spec.patch_pod_metadata {
        for (k, v) in &p.annotations {
            let current = out.get(k).or_else(|| pod_annotations.get(k)).cloned();
            match (p.patch_policy.unwrap_or_default(), current) {
                (P::Retain, Some(_)) => {}
                (P::MergePatchJson, Some(cur)) => {
                    let merged = serde_json::from_str::<serde_json::Value>(&cur)
                        .ok()
                        .zip(serde_json::from_str::<serde_json::Value>(v).ok())
                        .map(|(mut base, patch)| {
                            json_patch::merge(&mut base, &patch);
                            base.to_string()
                        });
                    out.insert(k.clone(), merged.unwrap_or_else(|| v.clone()));
                }
                _ => {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
    }
}
