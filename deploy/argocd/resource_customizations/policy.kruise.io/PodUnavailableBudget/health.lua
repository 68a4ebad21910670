-- Health of an OpenKruise PodUnavailableBudget, policy.kruise.io v1alpha1 and v1beta1, read as
-- Argo CD reads a PodDisruptionBudget: Degraded while fewer Pods are available than it protects.
local hs = {}
local status = obj.status

if status == nil or (status.observedGeneration or 0) < (obj.metadata.generation or 0) then
  hs.status = "Progressing"
  hs.message = "Waiting for the PodUnavailableBudget spec to be observed"
  return hs
end
local current = status.currentAvailable or 0
local desired = status.desiredAvailable or 0
local allowed = status.unavailableAllowed or 0
if current < desired then
  hs.status = "Degraded"
  hs.message = string.format("%d of %d Pods available, below the %d the budget keeps", current, status.totalReplicas or 0, desired)
  return hs
end
hs.status = "Healthy"
hs.message = string.format("%d of %d Pods available, %d more may be disrupted", current, status.totalReplicas or 0, allowed)
return hs
