-- Health of an OpenKruise WorkloadSpread, apps.kruise.io v1alpha1 and v1beta1. Subsets marked
-- unschedulable are how the spread adapts, not a failure, so they only show in the message.
local hs = {}
local status = obj.status

if status == nil or (status.observedGeneration or 0) < (obj.metadata.generation or 0) then
  hs.status = "Progressing"
  hs.message = "Waiting for the WorkloadSpread spec to be observed"
  return hs
end
local parts = {}
local pending = 0
local unschedulable = {}
for _, s in ipairs(status.subsetStatuses or {}) do
  table.insert(parts, string.format("%s=%d", s.name, s.replicas or 0))
  for _ in pairs(s.creatingPods or {}) do pending = pending + 1 end
  for _ in pairs(s.deletingPods or {}) do pending = pending + 1 end
  for _, c in ipairs(s.conditions or {}) do
    if c.type == "Schedulable" and c.status == "False" then
      table.insert(unschedulable, s.name)
    end
  end
end
local summary = "subsets " .. table.concat(parts, ", ")
if #unschedulable > 0 then
  summary = summary .. "; unschedulable: " .. table.concat(unschedulable, ", ")
end
if pending > 0 then
  hs.status = "Progressing"
  hs.message = string.format("Waiting for %d Pods to be created or deleted; %s", pending, summary)
  return hs
end
hs.status = "Healthy"
hs.message = "Pods spread: " .. summary
return hs
