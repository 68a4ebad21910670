-- Health of an OpenKruise PodProbeMarker (apps.kruise.io/v1alpha1).
local hs = {}
local status = obj.status

if status == nil or (status.observedGeneration or 0) < (obj.metadata.generation or 0) then
  hs.status = "Progressing"
  hs.message = "Waiting for the PodProbeMarker spec to be observed"
  return hs
end
hs.status = "Healthy"
hs.message = string.format("Probing %d matched Pods", status.matchedPods or 0)
return hs
