-- Health of an OpenKruise SidecarSet, apps.kruise.io v1alpha1 and v1beta1: how far its sidecars
-- are rolled out over the Pods it matches.
local hs = {}
local spec = obj.spec or {}
local status = obj.status
local strategy = spec.updateStrategy or {}

if status == nil or (status.observedGeneration or 0) < (obj.metadata.generation or 0) then
  hs.status = "Progressing"
  hs.message = "Waiting for the SidecarSet spec to be observed"
  return hs
end

local matched = status.matchedPods or 0
local updated = status.updatedPods or 0
local updatedReady = status.updatedReadyPods or 0
if strategy.type == "NotUpdate" then
  hs.status = "Healthy"
  hs.message = string.format("Sidecars are injected into new Pods only (NotUpdate); %d of %d matched Pods updated", updated, matched)
  return hs
end

local partition = 0
local p = strategy.partition
if type(p) == "number" then
  partition = p
elseif type(p) == "string" then
  local pct = tonumber(string.match(p, "^(%d+)%%$") or "")
  if pct ~= nil then
    partition = math.ceil(pct * matched / 100)
  else
    partition = tonumber(p) or 0
  end
end
if partition > matched then
  partition = matched
end
local expected = matched - partition

if strategy.paused == true and updated < expected then
  hs.status = "Suspended"
  hs.message = string.format("Sidecar rollout is paused: %d of %d Pods updated", updated, expected)
  return hs
end
-- A canary selector limits the rollout to the Pods it selects; their count is not in the status,
-- so a selector-limited rollout that has stopped moving reads as Suspended.
if strategy.selector ~= nil and updated < expected and updatedReady == updated then
  hs.status = "Suspended"
  hs.message = string.format("Canary rollout by selector: %d of %d Pods updated", updated, matched)
  return hs
end
if updated < expected then
  hs.status = "Progressing"
  hs.message = string.format("Waiting for sidecar rollout to finish: %d of %d Pods updated", updated, expected)
  return hs
end
if updatedReady < updated then
  hs.status = "Progressing"
  hs.message = string.format("Waiting for updated sidecars to be ready: %d of %d", updatedReady, updated)
  return hs
end
if expected < matched then
  hs.status = "Suspended"
  hs.message = string.format("Partitioned sidecar rollout: %d of %d Pods updated, %d held back by the partition", updated, matched, partition)
  return hs
end
hs.status = "Healthy"
hs.message = string.format("Sidecars are updated and ready in all %d matched Pods", matched)
return hs
