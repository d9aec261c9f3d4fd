-- Argo CD health of a StreamApp (streamapp.dev/v1alpha1), from the conditions the operator writes.
-- Progressing: not yet observed (no status, or status about an older spec), starting, or rebalancing.
-- Degraded: Degraded=True (tasks held for lost members, or nobody processes them) or a refused spec.
-- Healthy: Ready=True, no handoff in flight, and the status describes the current spec.
local hs = {}

local function condition(kind)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function describe(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return fallback
end

if obj.status == nil or obj.status.observedGeneration == nil or condition("Ready") == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe the app"
  return hs
end

if obj.metadata.generation ~= nil and obj.status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. tostring(obj.metadata.generation)
  return hs
end

local ready = condition("Ready")
local degraded = condition("Degraded")
if ready.reason == "InvalidSpec" or (degraded ~= nil and degraded.status == "True") then
  hs.status = "Degraded"
  hs.message = describe(degraded, describe(ready, "Tasks are not processed"))
  return hs
end

local rebalancing = condition("Rebalancing")
if rebalancing ~= nil and rebalancing.status == "True" then
  hs.status = "Progressing"
  hs.message = "Rebalancing: " .. describe(rebalancing, "handoff in progress")
  return hs
end

if ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready, "All tasks processed")
  return hs
end

hs.status = "Progressing"
hs.message = describe(ready, "Members starting")
return hs
