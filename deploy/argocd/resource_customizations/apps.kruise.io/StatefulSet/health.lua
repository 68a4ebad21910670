-- Health of an OpenKruise Advanced StatefulSet, apps.kruise.io v1alpha1 and v1beta1.
local hs = {}
local spec = obj.spec or {}
local status = obj.status
local strategy = spec.updateStrategy or {}
local rolling = strategy.rollingUpdate or {}

if status == nil or (status.observedGeneration or 0) < (obj.metadata.generation or 0) then
  hs.status = "Progressing"
  hs.message = "Waiting for the StatefulSet spec to be observed"
  return hs
end

for _, c in ipairs(status.conditions or {}) do
  if (c.type == "FailedCreatePod" or c.type == "FailedUpdatePod") and c.status == "True" then
    hs.status = "Degraded"
    hs.message = c.type .. ": " .. (c.message or "")
    return hs
  end
end

local replicas = spec.replicas or 1
local ready = status.readyReplicas or 0
local available = status.availableReplicas or ready
if strategy.type == "OnDelete" then
  if available < replicas then
    hs.status = "Progressing"
    hs.message = string.format("Waiting for %d of %d replicas to be available", replicas - available, replicas)
    return hs
  end
  hs.status = "Healthy"
  hs.message = "StatefulSet has the OnDelete update strategy: Pods are updated when deleted"
  return hs
end

-- Ordinals at or above the partition are updated, the others kept.
local partition = rolling.partition or 0
if partition > replicas then
  partition = replicas
end
local expected = replicas - partition
local updated = status.updatedReplicas or 0
local updatedReady = status.updatedReadyReplicas or 0

if rolling.paused == true and updated < expected then
  hs.status = "Suspended"
  hs.message = string.format("Rollout is paused: %d of %d replicas updated", updated, expected)
  return hs
end
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
if updatedReady < expected or available < replicas then
  hs.status = "Progressing"
  hs.message = string.format("Waiting for rollout to finish: %d of %d replicas available", available, replicas)
  return hs
end
if expected < replicas then
  hs.status = "Suspended"
  hs.message = string.format("Partitioned rollout: %d of %d replicas updated, ordinals below %d kept", updated, replicas, partition)
  return hs
end
hs.status = "Healthy"
hs.message = string.format("All %d replicas are updated and available", replicas)
return hs
