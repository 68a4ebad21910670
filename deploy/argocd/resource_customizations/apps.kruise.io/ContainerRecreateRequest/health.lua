-- Health of an OpenKruise ContainerRecreateRequest, apps.kruise.io v1alpha1 and v1beta1.
local hs = {}
local status = obj.status or {}
local phase = status.phase or "Pending"

if phase == "Completed" or phase == "Succeeded" or phase == "Failed" then
  local failed = {}
  for _, s in ipairs(status.containerRecreateStates or {}) do
    if s.phase == "Failed" then
      local why = ""
      if s.message ~= nil and s.message ~= "" then
        why = " (" .. s.message .. ")"
      end
      table.insert(failed, (s.name or "?") .. why)
    end
  end
  if phase == "Failed" or #failed > 0 then
    hs.status = "Degraded"
    hs.message = "Recreate failed"
    if #failed > 0 then
      hs.message = hs.message .. " for " .. table.concat(failed, ", ")
    elseif status.message ~= nil and status.message ~= "" then
      hs.message = hs.message .. ": " .. status.message
    end
    return hs
  end
  hs.status = "Healthy"
  hs.message = "Containers recreated"
  return hs
end
hs.status = "Progressing"
hs.message = "Recreate is " .. string.lower(phase)
return hs
