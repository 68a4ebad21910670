-- Health of an OpenKruise ImagePullJob, apps.kruise.io v1alpha1 and v1beta1.
local hs = {}
local spec = obj.spec or {}
local status = obj.status or {}
local policy = (spec.completionPolicy or {}).type or "Always"
local desired = status.desired or 0
local succeeded = status.succeeded or 0
local failed = status.failed or 0
local done = status.completionTime ~= nil
  or (policy == "Never" and desired > 0 and succeeded + failed >= desired and (status.active or 0) == 0)

if done and failed > 0 then
  hs.status = "Degraded"
  hs.message = string.format("Pull failed on %d of %d nodes", failed, desired)
  if status.message ~= nil and status.message ~= "" then
    hs.message = hs.message .. ": " .. status.message
  end
  return hs
end
if done then
  hs.status = "Healthy"
  hs.message = string.format("Image pulled on %d of %d nodes", succeeded, desired)
  return hs
end
hs.status = "Progressing"
hs.message = string.format("Pulling: %d active, %d of %d nodes succeeded, %d failed", status.active or 0, succeeded, desired, failed)
return hs
