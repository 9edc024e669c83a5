-- Walker.lua: the player. Its cell counts steps and, at its first hello,
-- spawns a Probe (and a Beacon, the C class, once per cellapp) and hops.
local seen = require("lib.seen")
local beacon_spawned = false

local Walker = { cell = {}, base = {} }
local C, B = Walker.cell, Walker.base

C.fields = { spawned = "bool" }

function C:created() seen.saw("walker_created") end
function C:got_witness() seen.saw("got_witness") end
function C:lost_witness() seen.saw("lost_witness") end
function C:entered_view(other) seen.saw("entered_view") end
function C:left_view(id) seen.saw("left_view") end
function C:teleported(space_changed) seen.saw("teleported") end

function C:moved(metres)
    seen.saw("moved")
    self.steps = self.steps + 1
end

function C:hello(caller, n)
    seen.saw("method")
    if self.spawned then return end
    local x, y, z = self:position()
    -- nil: no entity id to hand yet (they come in blocks): the next hello
    -- tries again.
    if not tessera.spawn("Probe", nil, x + 2, y, z) then return end
    self.spawned = true
    if not beacon_spawned then
        beacon_spawned = tessera.spawn("Beacon", nil, x - 2, y, z) ~= nil
    end
    self:teleport(nil, x + 0.5, y, z)
    self:call_base(self, "Walker", "scored", 1)
end

function B:created()
    seen.saw("base_created")
    self:add_timer(200, 0, 1, 5)
end

function B:client_enabled() seen.saw("client_enabled") end
function B:destroyed() seen.saw("base_destroyed") end
function B:timer(id, tag, user)
    seen.saw("base_timer")
    -- A call to a base no one has: it comes back as call_failed.
    self:call_base(987654321, "Walker", "scored", 1)
end
function B:call_failed(target, part, method) seen.saw("base_call_failed") end
function B:written(ok, detail) seen.saw("base_written") end
function B:handover_refused(target, rule) seen.saw("base_handover_refused") end

function B:scored(caller, points)
    seen.saw("base_method")
    self.score = self.score + points
end

return Walker
