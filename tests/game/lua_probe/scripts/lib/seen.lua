-- lib/seen.lua: logs "probe-hook NAME" the first time this process runs a
-- hook, so the test can tell every hook ran without a line per call.
local seen = {}
local M = {}

function M.saw(hook)
    if not seen[hook] then
        seen[hook] = true
        tessera.log("probe-hook " .. hook)
    end
end

return M
