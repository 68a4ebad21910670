-- Health of an OpenKruise PersistentPodState (apps.kruise.io v1alpha1 and v1beta1).
local hs = {}
local status = obj.status

if status == nil or (status.observedGeneration or 0) < (obj.metadata.generation or 0) then
  hs.status = "Progressing"
  hs.message = "Waiting for the PersistentPodState spec to be observed"
  return hs
end
local n = 0
for _ in pairs(status.podStates or {}) do n = n + 1 end
hs.status = "Healthy"
hs.message = string.format("State kept for %d Pods", n)
return hs
