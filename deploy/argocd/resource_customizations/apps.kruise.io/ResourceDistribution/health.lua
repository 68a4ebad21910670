-- Health of an OpenKruise ResourceDistribution (apps.kruise.io/v1alpha1).
local hs = {}
local status = obj.status

if status == nil or (status.observedGeneration or 0) < (obj.metadata.generation or 0) then
  hs.status = "Progressing"
  hs.message = "Waiting for the ResourceDistribution spec to be observed"
  return hs
end
local desired = status.desired or 0
local succeeded = status.succeeded or 0
local failed = status.failed or 0
if failed > 0 then
  local reasons = {}
  for _, c in ipairs(status.conditions or {}) do
    if c.failedNamespace ~= nil and #c.failedNamespace > 0 then
      table.insert(reasons, c.type .. " in " .. table.concat(c.failedNamespace, ", "))
    end
  end
  hs.status = "Degraded"
  hs.message = string.format("Distributed to %d of %d namespaces, %d failed", succeeded, desired, failed)
  if #reasons > 0 then
    hs.message = hs.message .. ": " .. table.concat(reasons, "; ")
  end
  return hs
end
if succeeded < desired then
  hs.status = "Progressing"
  hs.message = string.format("Distributing: %d of %d namespaces", succeeded, desired)
  return hs
end
hs.status = "Healthy"
hs.message = string.format("Distributed to all %d namespaces", desired)
return hs
