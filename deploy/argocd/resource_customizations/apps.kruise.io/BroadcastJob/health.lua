-- Health of an OpenKruise BroadcastJob, apps.kruise.io v1alpha1 and v1beta1.
local hs = {}
local spec = obj.spec or {}
local status = obj.status or {}

for _, c in ipairs(status.conditions or {}) do
  if c.type == "Failed" and c.status == "True" then
    hs.status = "Degraded"
    hs.message = "BroadcastJob failed: " .. (c.message or c.reason or "")
    return hs
  end
end
if status.phase == "Failed" then
  hs.status = "Degraded"
  hs.message = string.format("BroadcastJob failed: %d of %d Pods failed", status.failed or 0, status.desired or 0)
  return hs
end
if status.phase == "Completed" then
  hs.status = "Healthy"
  hs.message = string.format("BroadcastJob completed: %d of %d Pods succeeded", status.succeeded or 0, status.desired or 0)
  return hs
end
if spec.paused == true or status.phase == "Paused" then
  hs.status = "Suspended"
  hs.message = string.format("BroadcastJob is paused: %d active, %d of %d succeeded", status.active or 0, status.succeeded or 0, status.desired or 0)
  return hs
end
hs.status = "Progressing"
hs.message = string.format("BroadcastJob is running: %d active, %d of %d succeeded", status.active or 0, status.succeeded or 0, status.desired or 0)
return hs
