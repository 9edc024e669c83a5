-- game.lua -- the demo game as a whole (demo/game/demo_cell.c's tick and
-- listener, demo_base.c's singleton). What must outlive a reload is in
-- tessera.kept: the guards this cellapp has spawned, the players it heard
-- of, the Census's id.
local settings = require("settings")
local calls = require("calls")

-- Spawns the guards still owed in the default space's spawn disc, as ids
-- arrive from Redis and once the space has a cell here.
local function spawn_guards()
    local kept = tessera.kept
    local owed = settings.get().npc_count
    kept.npcs_spawned = kept.npcs_spawned or 0
    if kept.npcs_spawned >= owed then return end
    local space = tessera.default_space()
    local centre_x, centre_z, radius = tessera.spawn_area(space)
    if not centre_x then return end
    while kept.npcs_spawned < owed do
        local angle = tessera.random() * 2.0 * math.pi
        local distance = math.sqrt(tessera.random()) * radius
        local x = centre_x + distance * math.cos(angle)
        local z = centre_z + distance * math.sin(angle)
        local yaw = tessera.random() * 2.0 * math.pi - math.pi
        -- Here, wherever the point is: one outside this cellapp's cell
        -- moves to its own at the end of the tick.
        if not tessera.spawn("Npc", space, x, 0, z, yaw) then return end -- next tick
        kept.npcs_spawned = kept.npcs_spawned + 1
    end
end

-- The cellapp hears of every player who joins the cluster, wherever they
-- log in; it names them by their display name, never the account.
local function heard_player_joined(event, source, fields)
    local kept = tessera.kept
    kept.players_heard = (kept.players_heard or 0) + 1
    if kept.players_heard == 1 or kept.players_heard % 100 == 0 then
        tessera.log(string.format("demo: %s joined (%d players heard of so far)", fields.name, kept.players_heard))
    end
end

-- The singleton "census" is known, or made again: its handle.
local function census_ready(ok, holder)
    if not ok or holder == tessera.kept.census_id then return end
    tessera.kept.census_id = holder
    if tessera.resolve(holder) then tessera.log(string.format("the Census is entity %d here", holder)) end
    -- Every Avatar here joins it: those made before this baseapp knew it,
    -- or counted by one that is gone (a census made again starts from
    -- nothing).
    for _, id in ipairs(tessera.find_by_class("Avatar")) do
        local avatar = tessera.resolve(id)
        if avatar then calls.try(avatar, "call_base", holder, "Census", "joined", avatar) end
    end
end

return {
    cell = {
        init = function() settings.read() end,
        tick = spawn_guards,
        events = { player_joined = heard_player_joined },
    },
    base = {
        -- Every baseapp takes part, once per process (a reload runs init
        -- again; the engine keeps calling the first census_ready).
        init = function()
            if tessera.kept.census_asked then return end
            tessera.kept.census_asked = true
            tessera.singleton("census", "Census", census_ready)
        end,
    },
}
