//! [`HOOKS`]: every hook, in the order the configurations list them.

use kruise_api::features::Gate;
use kruise_api::keys;

use super::hook::{
    BOTH_VERSIONS, CREATE, CREATE_UPDATE, CREATE_UPDATE_DELETE, ClusterHandler as C, DELETE,
    FailurePolicy, Handler::Cluster, Handler::Gated, Handler::Pure, Hook, Kind, Namespaces,
    Objects, Rule, V1ALPHA1,
};
use super::*;
use crate::{
    advancedcronjob, broadcastjob, cloneset, crr, daemonset, ephemeraljob, imagelistpulljob,
    imagepulljob, nodeimage, podprobemarker, resourcedistribution, sidecarset, statefulset,
    uniteddeployment,
};

const MUTATING: Hook = Hook::of(Kind::Mutating);
const VALIDATING: Hook = Hook::of(Kind::Validating);

/// The Pod hooks: kept away from the system namespaces, with the chart's failure policy, and
/// absent while `PodWebhook` is off (upstream registers no Pod handler then).
const POD_MUTATING: Hook = Hook {
    failure_policy: FailurePolicy::PodSetting,
    namespaces: Namespaces::OutsideSystem,
    gate: Some(Gate::PodWebhook),
    ..MUTATING
};
const POD_VALIDATING: Hook = Hook {
    kind: Kind::Validating,
    ..POD_MUTATING
};

/// Deletion protection, as upstream registers it: DELETE only, failurePolicy Fail. One
/// addition: only objects carrying the label are sent (the handler admits every other one
/// anyway); without it, a manager that is down, or being uninstalled (its own Deployment,
/// Service and Namespace go last), would make every such deletion in the cluster fail.
const PROTECTION: Hook = Hook {
    objects: Objects::DeletionProtected,
    handler: Cluster(C::DeletionProtection),
    ..VALIDATING
};

const fn protection(
    name: &'static str,
    path: &'static str,
    group: &'static [&'static str],
    versions: &'static [&'static str],
    resources: &'static [&'static str],
) -> Hook {
    Hook {
        name,
        path,
        rule: Rule {
            groups: group,
            versions,
            operations: DELETE,
            resources,
        },
        ..PROTECTION
    }
}

/// Every hook. The mutating ones and the validating ones are each registered in this order.
pub const HOOKS: &[Hook] = &[
    Hook {
        name: POD_MUTATING_HOOK,
        path: MUTATE_POD,
        rule: Rule {
            groups: &[""],
            versions: &["v1"],
            operations: CREATE,
            resources: &["pods"],
        },
        handler: Cluster(C::PodMutation),
        ..POD_MUTATING
    },
    Hook {
        name: "mcloneset.kb.io",
        path: MUTATE_CLONESET,
        aliases: &[MUTATE_CLONESET_V1ALPHA1, MUTATE_CLONESET_V1BETA1],
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["clonesets"]),
        handler: Gated(cloneset::defaults::mutate),
        ..MUTATING
    },
    Hook {
        name: "vcloneset.kb.io",
        path: VALIDATE_CLONESET,
        aliases: &[VALIDATE_CLONESET_V1ALPHA1, VALIDATE_CLONESET_V1BETA1],
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE_DELETE, &["clonesets"]),
        handler: Cluster(C::CloneSetTemplate),
        ..VALIDATING
    },
    Hook {
        name: "mstatefulset.kb.io",
        path: MUTATE_STATEFULSET,
        aliases: &[MUTATE_STATEFULSET_V1ALPHA1, MUTATE_STATEFULSET_V1BETA1],
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["statefulsets"]),
        handler: Gated(statefulset::defaults::mutate),
        ..MUTATING
    },
    Hook {
        name: "vstatefulset.kb.io",
        path: VALIDATE_STATEFULSET,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE_DELETE, &["statefulsets"]),
        handler: Cluster(C::StatefulSet),
        ..VALIDATING
    },
    Hook {
        name: "mdaemonset.kb.io",
        path: MUTATE_DAEMONSET,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["daemonsets"]),
        handler: Pure(daemonset::defaults::mutate),
        ..MUTATING
    },
    Hook {
        name: "vdaemonset.kb.io",
        path: VALIDATE_DAEMONSET,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE_DELETE, &["daemonsets"]),
        handler: Pure(daemonset::validation::validate),
        ..VALIDATING
    },
    Hook {
        name: "madvancedcronjob.kb.io",
        path: MUTATE_ADVANCEDCRONJOB,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["advancedcronjobs"]),
        handler: Gated(advancedcronjob::defaults::mutate),
        ..MUTATING
    },
    Hook {
        name: "vadvancedcronjob.kb.io",
        path: VALIDATE_ADVANCEDCRONJOB,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["advancedcronjobs"]),
        handler: Pure(advancedcronjob::validation::validate),
        ..VALIDATING
    },
    Hook {
        name: "mbroadcastjob.kb.io",
        path: MUTATE_BROADCASTJOB,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["broadcastjobs"]),
        handler: Gated(broadcastjob::defaults::mutate),
        ..MUTATING
    },
    Hook {
        name: "vbroadcastjob.kb.io",
        path: VALIDATE_BROADCASTJOB,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["broadcastjobs"]),
        handler: Pure(broadcastjob::validation::validate),
        ..VALIDATING
    },
    Hook {
        name: "mephemeraljob.kb.io",
        path: MUTATE_EPHEMERALJOB,
        rule: Rule::apps(V1ALPHA1, CREATE_UPDATE, &["ephemeraljobs"]),
        handler: Pure(ephemeraljob::defaults::mutate),
        ..MUTATING
    },
    Hook {
        name: "vephemeraljobs.kb.io",
        path: VALIDATE_EPHEMERALJOB,
        rule: Rule::apps(V1ALPHA1, CREATE_UPDATE, &["ephemeraljobs"]),
        handler: Pure(ephemeraljob::validation::validate),
        ..VALIDATING
    },
    Hook {
        name: "mpodprobemarker.kb.io",
        path: MUTATE_PODPROBEMARKER,
        rule: Rule::apps(V1ALPHA1, CREATE_UPDATE, &["podprobemarkers"]),
        handler: Pure(podprobemarker::defaults::mutate),
        ..MUTATING
    },
    Hook {
        name: "vpodprobemarker.kb.io",
        path: VALIDATE_PODPROBEMARKER,
        rule: Rule::apps(V1ALPHA1, CREATE_UPDATE, &["podprobemarkers"]),
        // Upstream checks PodProbeMarkerGate first, then KruiseDaemon.
        refused_without: &[Gate::PodProbeMarkerGate, Gate::KruiseDaemon],
        handler: Pure(podprobemarker::validation::validate),
        ..VALIDATING
    },
    Hook {
        name: "mimagepulljob.kb.io",
        path: MUTATE_IMAGEPULLJOB,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["imagepulljobs"]),
        handler: Pure(imagepulljob::defaults::mutate),
        ..MUTATING
    },
    Hook {
        name: "vimagepulljob.kb.io",
        path: VALIDATE_IMAGEPULLJOB,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["imagepulljobs"]),
        refused_without: &[Gate::KruiseDaemon, Gate::ImagePullJobGate],
        handler: Pure(imagepulljob::validation::validate),
        ..VALIDATING
    },
    Hook {
        name: "mnodeimage.kb.io",
        path: MUTATE_NODEIMAGE,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["nodeimages"]),
        handler: Pure(nodeimage::defaults::mutate),
        ..MUTATING
    },
    Hook {
        name: "vnodeimage.kb.io",
        path: VALIDATE_NODEIMAGE,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["nodeimages"]),
        handler: Pure(nodeimage::validation::validate),
        ..VALIDATING
    },
    Hook {
        name: "mimagelistpulljob.kb.io",
        path: MUTATE_IMAGELISTPULLJOB,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["imagelistpulljobs"]),
        handler: Pure(imagelistpulljob::defaults::mutate),
        ..MUTATING
    },
    Hook {
        name: "vimagelistpulljob.kb.io",
        path: VALIDATE_IMAGELISTPULLJOB,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["imagelistpulljobs"]),
        refused_without: &[Gate::KruiseDaemon, Gate::ImagePullJobGate],
        handler: Pure(imagelistpulljob::validation::validate),
        ..VALIDATING
    },
    // CREATE only: upstream's handler also refuses spec changes on UPDATE, which here is the
    // validating hook's job (it sees the object after every mutation).
    Hook {
        name: "mcontainerrecreaterequest.kb.io",
        path: MUTATE_CRR,
        rule: Rule::apps(BOTH_VERSIONS, CREATE, &["containerrecreaterequests"]),
        handler: Cluster(C::ContainerRecreateRequest),
        ..MUTATING
    },
    Hook {
        name: "vcontainerrecreaterequest.kb.io",
        path: VALIDATE_CRR,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["containerrecreaterequests"]),
        handler: Pure(crr::validation::validate),
        ..VALIDATING
    },
    Hook {
        name: "msidecarset.kb.io",
        path: MUTATE_SIDECARSET,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["sidecarsets"]),
        handler: Pure(sidecarset::defaults::mutate),
        ..MUTATING
    },
    Hook {
        name: "vsidecarset.kb.io",
        path: VALIDATE_SIDECARSET,
        rule: Rule::apps(BOTH_VERSIONS, CREATE_UPDATE, &["sidecarsets"]),
        handler: Cluster(C::SidecarSet),
        ..VALIDATING
    },
    Hook {
        name: "vresourcedistribution.kb.io",
        path: VALIDATE_RESOURCEDISTRIBUTION,
        rule: Rule::apps(V1ALPHA1, CREATE_UPDATE, &["resourcedistributions"]),
        refused_without: &[Gate::ResourceDistributionGate],
        handler: Pure(resourcedistribution::validation::validate),
        ..VALIDATING
    },
    Hook {
        name: "vpersistentpodstate.kb.io",
        path: VALIDATE_PPS,
        rule: Rule::apps(V1ALPHA1, CREATE_UPDATE, &["persistentpodstates"]),
        handler: Cluster(C::PersistentPodState),
        ..VALIDATING
    },
    Hook {
        name: "vworkloadspread.kb.io",
        path: VALIDATE_WORKLOADSPREAD,
        rule: Rule::apps(V1ALPHA1, CREATE_UPDATE, &["workloadspreads"]),
        refused_without: &[Gate::WorkloadSpread],
        handler: Cluster(C::WorkloadSpread),
        ..VALIDATING
    },
    Hook {
        name: "muniteddeployment.kb.io",
        path: MUTATE_UNITEDDEPLOYMENT,
        rule: Rule::apps(V1ALPHA1, CREATE_UPDATE, &["uniteddeployments"]),
        handler: Gated(uniteddeployment::defaults::mutate),
        ..MUTATING
    },
    Hook {
        name: "vuniteddeployment.kb.io",
        path: VALIDATE_UNITEDDEPLOYMENT,
        rule: Rule::apps(V1ALPHA1, CREATE_UPDATE, &["uniteddeployments"]),
        handler: Pure(uniteddeployment::validation::validate),
        ..VALIDATING
    },
    // Both versions, as upstream: a v1beta1 budget must reach the validator as written, to
    // refuse spec.ignoredPodSelector, which v1alpha1 cannot carry.
    Hook {
        name: "vpodunavailablebudget.kb.io",
        path: VALIDATE_PUB,
        rule: Rule {
            groups: &[keys::POLICY_GROUP],
            versions: BOTH_VERSIONS,
            operations: CREATE_UPDATE,
            resources: &["podunavailablebudgets"],
        },
        handler: Cluster(C::Budget),
        ..VALIDATING
    },
    // Upstream's two hooks on `/validate-pod`: Pod updates and deletes, and evictions.
    Hook {
        name: POD_WRITES_HOOK,
        path: VALIDATE_POD,
        rule: Rule {
            groups: &[""],
            versions: &["v1"],
            operations: &["UPDATE", "DELETE"],
            resources: &["pods"],
        },
        handler: Cluster(C::PodValidation),
        ..POD_VALIDATING
    },
    Hook {
        name: POD_EVICTIONS_HOOK,
        path: VALIDATE_POD,
        rule: Rule {
            groups: &[""],
            versions: &["v1"],
            operations: CREATE,
            resources: &["pods/eviction"],
        },
        handler: Cluster(C::PodValidation),
        ..POD_VALIDATING
    },
    protection(
        "vnamespace.kb.io",
        VALIDATE_NAMESPACE,
        &[""],
        &["v1"],
        &["namespaces"],
    ),
    protection(
        "vcustomresourcedefinition.kb.io",
        VALIDATE_CRD,
        &["apiextensions.k8s.io"],
        &["v1", "v1beta1"],
        &["customresourcedefinitions"],
    ),
    protection(
        "vbuiltindeployment.kb.io",
        VALIDATE_APPS_DEPLOYMENT,
        &["apps"],
        &["v1"],
        &["deployments"],
    ),
    protection(
        "vbuiltinreplicaset.kb.io",
        VALIDATE_APPS_REPLICASET,
        &["apps"],
        &["v1"],
        &["replicasets"],
    ),
    protection(
        "vbuiltinstatefulset.kb.io",
        VALIDATE_APPS_STATEFULSET,
        &["apps"],
        &["v1"],
        &["statefulsets"],
    ),
    // Upstream registers these two only while the gate is on, the others always (their
    // handler then admits).
    Hook {
        gate: Some(Gate::ResourcesDeletionProtection),
        ..protection(
            "vservice.kb.io",
            VALIDATE_SERVICE,
            &[""],
            &["v1"],
            &["services"],
        )
    },
    Hook {
        gate: Some(Gate::ResourcesDeletionProtection),
        ..protection(
            "vingress.kb.io",
            VALIDATE_INGRESS,
            &["networking.k8s.io"],
            &["v1", "v1beta1"],
            &["ingresses"],
        )
    },
];
