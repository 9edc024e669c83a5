-- settings.lua -- the cell rules' game settings (the cellapp's config,
-- "game": {...}), as demo/game/demo_cell.c reads them: read by game.lua's
-- init at start and at each reload, which refuses values out of bounds.

local settings = {}
local values

-- Reads and checks the settings; raises an error naming the rule when one
-- is out of bounds (game.lua's init then fails, and so does the start).
function settings.read()
    local count = tessera.setting("npc_count", 20)
    local v = {
        -- whole guards, as C's cast counts them (NaN or beyond: out of bounds)
        npc_count = math.tointeger(count >= 0 and math.floor(count) or math.ceil(count)) or -1,
        npc_trap_radius = tessera.setting("npc_trap_radius", 8),
        patrol_speed = tessera.setting("npc_patrol_speed", 0),
        patrol_radius = tessera.setting("npc_patrol_radius", 15),
        chase_speed = tessera.setting("npc_chase_speed", 0),
    }
    if v.npc_count < 0 or v.npc_count > 1000000 or not (v.npc_trap_radius > 0) or not (v.patrol_speed >= 0)
        or not (v.patrol_radius >= 0) or not (v.chase_speed >= 0) then
        error("demo: npc_count must be 0..1000000, npc_trap_radius above 0, and the patrol and chase settings 0 "
            .. "or more", 0)
    end
    values = v
    return v
end

-- The settings read last.
function settings.get()
    return values or settings.read()
end

return settings
