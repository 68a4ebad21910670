-- Health of an OpenKruise AdvancedCronJob, apps.kruise.io v1alpha1 and v1beta1. A schedule is
-- healthy whether or not a run is active, so an application is not held Progressing by every
-- run; the runs themselves (Jobs, BroadcastJobs) carry their own health.
local hs = {}
local spec = obj.spec or {}
local status = obj.status or {}

if spec.paused == true then
  hs.status = "Suspended"
  hs.message = "AdvancedCronJob is paused"
  return hs
end
local active = #(status.active or {})
if status.lastScheduleTime == nil then
  hs.status = "Healthy"
  hs.message = "AdvancedCronJob has not been scheduled yet"
  return hs
end
hs.status = "Healthy"
hs.message = string.format("Last scheduled at %s, %d active", status.lastScheduleTime, active)
return hs
