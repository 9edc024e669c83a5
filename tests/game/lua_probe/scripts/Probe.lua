-- Probe.lua: an NPC that runs every cell hook there is, and shows what
-- changes when it is reloaded (VERSION names the event it fires).
local seen = require("lib.seen")
local VERSION = 1
local runaway_started = false

local Probe = { cell = {} }
local C = Probe.cell

C.fields = { hits = "int32", note = "string:16", home_x = "double", walks = "int32" }
C.thinks = { "wander", "runaway" }
C.inputs = { Poke = "int32" }

function C:created()
    seen.saw("created")
    local x = self:position()
    self.home_x = x
    self.walks = 0
    self.note = "hi"
    self:add_timer(100, 250, 7, 99)
    self:set_think("wander", 150)
    self:add_trap(3, 6.0)
    self:connect("OnPoked", "!self", "Poke", "", 0, -1)
    local ok, err = pcall(function() self.level = 300 end)
    tessera.log("probe-range " .. tostring(ok) .. " " .. tostring(err))
    ok, err = pcall(function() self.level = "high" end)
    tessera.log("probe-type " .. tostring(ok) .. " " .. tostring(err))
    ok, err = pcall(function() self.nonsense = 1 end)
    tessera.log("probe-unknown " .. tostring(ok) .. " " .. tostring(err))
    self.level = 5
    tessera.log("probe-metatable " .. tostring(getmetatable(self)))
end

function C:property_changed(name, index) seen.saw("property_changed") end
function C:destroyed() seen.saw("destroyed") end
function C:restored()
    seen.saw("restored")
    -- Its fields came back with it, from its backup or its ghost.
    tessera.log("probe-restored hits " .. tostring(self.hits) .. " note " .. tostring(self.note))
end
function C:leaving() seen.saw("leaving") end
function C:arrived() seen.saw("arrived") end
function C:entered_trap(tag, other) seen.saw("entered_trap"); self.visits = self.visits + 1 end
function C:left_trap(tag, other) seen.saw("left_trap") end
function C:controller_moved(id, user) seen.saw("controller_moved") end
function C:controller_arrived(id, user)
    seen.saw("controller_arrived")
    if self.label ~= "follower" then
        self.walks = self.walks + 1
        self:set_think("wander", 300)
    end
end
function C:controller_failed(id, user, reason)
    seen.saw("controller_failed")
    seen.saw("failure " .. tostring(user) .. " " .. reason)
end
function C:Poke(activator, caller, value) seen.saw("input") end
function C:ring(caller, from, n) seen.saw("method_from_c") end

-- Walks between x = -8 and x = 8, across the line between the cells (x = 0).
function C:wander()
    seen.saw("think")
    if self.label == "follower" then return end
    local x, y, z = self:position()
    local target = x > 0 and -8 or 8
    self:move_to_point(target, y, z, 6, 0.5, true, 1)
end

function C:runaway()
    seen.saw("runaway")
    local n = 0
    while true do n = n + 1 end
end

function C:timer(id, tag, user)
    seen.saw("timer")
    self.hits = self.hits + 1
    if self.label == "decoy" then
        if self.hits >= 3 then self:destroy() end
        return
    end
    if self.hits % 4 == 0 then
        self:fire_event("ping_v" .. VERSION, { probe = self, level = self.level }, "space")
    end
    if self.hits == 3 then self:fire_output("OnPoked", nil, "7") end
    if self.hits == 5 then
        local beacons = tessera.find_by_class("Beacon")
        if beacons[1] then self:call_cell(beacons[1], "answer", self, 12) end
    end
    if self.hits == 6 and not runaway_started and tessera.setting("runaway", 0) > 0 then
        runaway_started = true
        self:set_think("runaway", 0)
    end
    if self.hits >= 10 and self.walks > 0 and self.label ~= "follower" then
        -- a decoy that goes away while this one follows it, once this one
        -- has finished a walk (controller_arrived): a walk from far off
        -- takes longer than ten hits on a slow (sanitized, loaded) host
        local x, y, z = self:position()
        local decoy = tessera.spawn("Probe", nil, x + 3, y, z)
        local other = decoy and tessera.resolve(decoy)
        if other then
            other.label = "decoy"
            self.label = "follower" -- wanders no more: its move would replace the follow
            self:cancel_think("wander")
            self:move_to_entity(other, 0.1, 0.05, false, 2)
        end
    end
    if self.hits == 30 and self:id() % 2 == 1 then self:destroy() end
end

return Probe
