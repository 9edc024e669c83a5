-- game.lua: spawns the crowd (npc_count), over a square of area_half_width
-- metres, as many a tick as entity ids allow. It counts the crowd there is
-- rather than trusting a count of its own: a reload starts the script's
-- locals afresh (`complete` too, which only saves the count once all are in).
local complete = false

return {
    cell = {
        tick = function()
            if complete then return end
            local _, spawned = tessera.find_by_class("Crowd")
            local count = tessera.setting("npc_count", 1000)
            local half = tessera.setting("area_half_width", 150)
            local side = math.ceil(math.sqrt(count))
            local step = 2 * half / side
            while spawned < count do
                local x = -half + (spawned % side + 0.5) * step
                local z = -half + (spawned // side + 0.5) * step
                if not tessera.spawn("Crowd", nil, x, 0, z) then return end
                spawned = spawned + 1
            end
            complete = true
        end,
    },
}
