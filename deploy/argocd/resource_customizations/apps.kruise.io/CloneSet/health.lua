-- Health of an OpenKruise CloneSet, apps.kruise.io v1alpha1 and v1beta1.
local hs = {}
local spec = obj.spec or {}
local status = obj.status
local strategy = spec.updateStrategy or {}
-- v1beta1 keeps partition and paused under rollingUpdate, v1alpha1 in updateStrategy itself.
local rolling = strategy.rollingUpdate or strategy

if status == nil or (status.observedGeneration or 0) < (obj.metadata.generation or 0) then
  hs.status = "Progressing"
  hs.message = "Waiting for the CloneSet spec to be observed"
  return hs
end

for _, c in ipairs(status.conditions or {}) do
  if c.type == "Progressing" and c.reason == "ProgressDeadlineExceeded" then
    hs.status = "Degraded"
    hs.message = "CloneSet has timed out progressing: " .. (c.message or "")
    return hs
  end
  if (c.type == "FailedScale" or c.type == "FailedUpdate") and c.status == "True" then
    hs.status = "Degraded"
    hs.message = c.type .. ": " .. (c.message or "")
    return hs
  end
end

local replicas = spec.replicas or 1
-- A percentage partition counts Pods rounded up, as the controller does.
local partition = 0
local p = rolling.partition
if type(p) == "number" then
  partition = p
elseif type(p) == "string" then
  local pct = tonumber(string.match(p, "^(%d+)%%$") or "")
  if pct ~= nil then
    partition = math.ceil(pct * replicas / 100)
  else
    partition = tonumber(p) or 0
  end
end
if partition > replicas then
  partition = replicas
end
local expected = replicas - partition
local updated = status.updatedReplicas or 0
local updatedAvailable = status.updatedAvailableReplicas or 0

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
  hs.message = string.format("Waiting for rollout to finish: %d old replicas are pending termination", status.replicas - replicas)
  return hs
end
if updatedAvailable < expected or (status.availableReplicas or 0) < replicas then
  hs.status = "Progressing"
  hs.message = string.format("Waiting for rollout to finish: %d of %d replicas available", status.availableReplicas or 0, replicas)
  return hs
end
if expected < replicas then
  hs.status = "Suspended"
  hs.message = string.format("Partitioned rollout: %d of %d replicas updated, %d held back by the partition", updated, replicas, partition)
  return hs
end
hs.status = "Healthy"
hs.message = string.format("All %d replicas are updated and available", replicas)
return hs
