-- Health of an OpenKruise ImageListPullJob, apps.kruise.io v1alpha1 and v1beta1.
local hs = {}
local status = obj.status or {}
local desired = status.desired or 0
local completed = status.completed or 0
local failures = status.failedImageStatuses or {}

if status.completionTime ~= nil and #failures > 0 then
  local names = {}
  for _, f in ipairs(failures) do
    table.insert(names, f.name or f.imagePullJob or "?")
  end
  hs.status = "Degraded"
  hs.message = string.format("%d of %d images failed to pull: %s", #failures, desired, table.concat(names, ", "))
  return hs
end
if status.completionTime ~= nil then
  hs.status = "Healthy"
  hs.message = string.format("All %d images pulled", desired)
  return hs
end
hs.status = "Progressing"
hs.message = string.format("Pulling images: %d of %d completed, %d active", completed, desired, status.active or 0)
return hs
