-- Health of an OpenKruise EphemeralJob (apps.kruise.io/v1alpha1).
local hs = {}
local spec = obj.spec or {}
local status = obj.status or {}
local phase = status.phase or ""
local counts = string.format("%d matched, %d running, %d succeeded, %d failed", status["match"] or 0, status.running or 0, status.succeeded or 0, status.failed or 0)

if phase == "Failed" or phase == "Error" then
  local reason = ""
  for _, c in ipairs(status.conditions or {}) do
    if (c.type == "JobFailed" or c.type == "JobError") and c.status == "True" and c.message ~= nil then
      reason = ": " .. c.message
    end
  end
  hs.status = "Degraded"
  hs.message = "EphemeralJob " .. string.lower(phase) .. reason .. " (" .. counts .. ")"
  return hs
end
if phase == "Succeeded" then
  hs.status = "Healthy"
  hs.message = "EphemeralJob succeeded (" .. counts .. ")"
  return hs
end
if spec.paused == true or phase == "Paused" then
  hs.status = "Suspended"
  hs.message = "EphemeralJob is paused (" .. counts .. ")"
  return hs
end
if phase == "Unknown" then
  hs.status = "Unknown"
  hs.message = "EphemeralJob state is unknown (" .. counts .. ")"
  return hs
end
hs.status = "Progressing"
hs.message = "EphemeralJob is running (" .. counts .. ")"
return hs
