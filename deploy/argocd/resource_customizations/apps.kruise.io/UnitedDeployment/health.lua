-- Health of an OpenKruise UnitedDeployment, apps.kruise.io v1alpha1 and v1beta1.
local hs = {}
local spec = obj.spec or {}
local status = obj.status
local strategy = spec.updateStrategy or {}

if status == nil or (status.observedGeneration or 0) < (obj.metadata.generation or 0) then
  hs.status = "Progressing"
  hs.message = "Waiting for the UnitedDeployment spec to be observed"
  return hs
end

for _, c in ipairs(status.conditions or {}) do
  local failed = (c.type == "SubsetFailure" and c.status == "True")
    or ((c.type == "SubsetProvisioned" or c.type == "SubsetUpdated") and c.status == "False")
  if failed then
    hs.status = "Degraded"
    hs.message = c.type .. ": " .. (c.message or c.reason or "")
    return hs
  end
end

local replicas = spec.replicas or 1
-- Manual partitions keep that many Pods of each subset on the old revision, capped at the
-- subset's size.
local held = 0
local manual = strategy.manualUpdate or {}
local subsetReplicas = status.subsetReplicas or {}
for subset, partition in pairs(manual.partitions or {}) do
  local size = subsetReplicas[subset]
  if size ~= nil and partition > size then
    partition = size
  end
  held = held + partition
end
if held > replicas then
  held = replicas
end
local expected = replicas - held
local updated = status.updatedReplicas or 0
local updatedReady = status.updatedReadyReplicas or 0
local ready = status.readyReplicas or 0

if updated < expected then
  hs.status = "Progressing"
  hs.message = string.format("Waiting for rollout to finish: %d of %d replicas updated", updated, expected)
  return hs
end
if (status.replicas or 0) > replicas then
  hs.status = "Progressing"
  hs.message = string.format("Waiting for rollout to finish: %d replicas are pending termination", status.replicas - replicas)
  return hs
end
if updatedReady < expected or ready < replicas then
  hs.status = "Progressing"
  hs.message = string.format("Waiting for rollout to finish: %d of %d replicas ready", ready, replicas)
  return hs
end
if expected < replicas then
  hs.status = "Suspended"
  hs.message = string.format("Partitioned rollout: %d of %d replicas updated, %d held back by subset partitions", updated, replicas, held)
  return hs
end
hs.status = "Healthy"
hs.message = string.format("All %d replicas are updated and ready", replicas)
return hs
