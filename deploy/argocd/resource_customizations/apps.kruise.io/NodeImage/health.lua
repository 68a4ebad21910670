-- Health of an OpenKruise NodeImage (apps.kruise.io v1alpha1 and v1beta1): the images the
-- daemon pulls on one node.
local hs = {}
local status = obj.status or {}
local desired = status.desired or 0
local failed = status.failed or 0
local busy = (status.pulling or 0) + (status.waiting or 0)

if failed > 0 then
  local names = {}
  for name, image in pairs(status.imageStatuses or {}) do
    for _, tag in ipairs(image.tags or {}) do
      if tag.phase == "Failed" then
        table.insert(names, name .. ":" .. (tag.tag or "?"))
      end
    end
  end
  table.sort(names)
  hs.status = "Degraded"
  hs.message = string.format("%d of %d images failed", failed, desired)
  if #names > 0 then
    hs.message = hs.message .. ": " .. table.concat(names, ", ")
  end
  return hs
end
if busy > 0 then
  hs.status = "Progressing"
  hs.message = string.format("Pulling %d of %d images (%d done)", busy, desired, status.succeeded or 0)
  return hs
end
hs.status = "Healthy"
hs.message = string.format("%d of %d images pulled", status.succeeded or 0, desired)
return hs
