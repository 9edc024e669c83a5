-- game.lua: the probe game as a whole. Its cell.init tries everything the
-- sandbox withholds and logs what it was told.
local seen = require("lib.seen")

local function try(what, f)
    local ok, err = pcall(f)
    tessera.log("sandbox " .. what .. ": " .. (ok and "ALLOWED" or ("refused: " .. tostring(err))))
end

local function sandbox_checks()
    try("io", function() return io.open("/etc/passwd") end)
    try("os.execute", function() return os.execute("true") end)
    try("os.exit", function() return os.exit(1) end)
    try("require outside", function() return require("../../etc/passwd") end)
    try("require os", function() return require("os") end)
    try("load", function() return load("return 1")() end)
    try("dofile", function() return dofile("/etc/passwd") end)
    try("debug", function() return debug.getinfo(1) end)
    try("string.dump", function() return string.dump(print) end)
    tessera.log("sandbox os.time: " .. type(os.time()))
end

return {
    cell = {
        init = function()
            sandbox_checks()
        end,
        tick = function()
            seen.saw("game_tick")
        end,
        before_thinks = function() seen.saw("before_thinks") end,
        after_thinks = function() seen.saw("after_thinks") end,
        events = {
            ping_v1 = function(name, source, fields)
                seen.saw("event_heard")
            end,
            ping_v2 = function(name, source, fields)
                seen.saw("event_heard_v2")
            end,
        },
    },
    base = {
        init = function()
            tessera.log("probe base init")
        end,
        tick = function()
            seen.saw("base_game_tick")
        end,
    },
}
