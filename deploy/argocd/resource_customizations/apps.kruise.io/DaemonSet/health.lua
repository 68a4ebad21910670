-- Health of an OpenKruise Advanced DaemonSet, apps.kruise.io v1alpha1 and v1beta1.
local hs = {}
local spec = obj.spec or {}
local status = obj.status
local strategy = spec.updateStrategy or {}
local rolling = strategy.rollingUpdate or {}

if status == nil or (status.observedGeneration or 0) < (obj.metadata.generation or 0) then
  hs.status = "Progressing"
  hs.message = "Waiting for the DaemonSet spec to be observed"
  return hs
end

local desired = status.desiredNumberScheduled or 0
local available = status.numberAvailable or 0
if strategy.type == "OnDelete" then
  if available < desired then
    hs.status = "Progressing"
    hs.message = string.format("Waiting for %d of %d daemon Pods to be available", desired - available, desired)
    return hs
  end
  hs.status = "Healthy"
  hs.message = "DaemonSet has the OnDelete update strategy: Pods are updated when deleted"
  return hs
end

-- The partition keeps that many nodes on the old revision; a percentage is of the desired
-- nodes, rounded up as the controller does.
local partition = 0
local p = rolling.partition
if type(p) == "number" then
  partition = p
elseif type(p) == "string" then
  local pct = tonumber(string.match(p, "^(%d+)%%$") or "")
  if pct ~= nil then
    partition = math.ceil(pct * desired / 100)
  else
    partition = tonumber(p) or 0
  end
end
if partition > desired then
  partition = desired
end
local expected = desired - partition
local updated = status.updatedNumberScheduled or 0

if rolling.paused == true and updated < expected then
  hs.status = "Suspended"
  hs.message = string.format("Rollout is paused: %d of %d daemon Pods updated", updated, expected)
  return hs
end
if updated < expected then
  hs.status = "Progressing"
  hs.message = string.format("Waiting for rollout to finish: %d of %d daemon Pods updated", updated, expected)
  return hs
end
if available < desired then
  hs.status = "Progressing"
  hs.message = string.format("Waiting for rollout to finish: %d of %d daemon Pods available", available, desired)
  return hs
end
if expected < desired then
  hs.status = "Suspended"
  hs.message = string.format("Partitioned rollout: %d of %d daemon Pods updated, %d held back by the partition", updated, desired, partition)
  return hs
end
hs.status = "Healthy"
hs.message = string.format("All %d daemon Pods are updated and available", desired)
return hs
