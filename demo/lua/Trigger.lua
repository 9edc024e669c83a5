-- Trigger.lua -- a zone of the map (demo/game/demo_world.c): `size` (a
-- keyvalue) around it; an avatar stepping in fires OnTrigger, with the
-- avatar as the activator (and no caller).
local Trigger = { cell = {} }
local C = Trigger.cell

local TRAP_ZONE = 2

function C:created()
    self:add_trap(TRAP_ZONE, self.size)
end

function C:entered_trap(tag, visitor)
    if tag ~= TRAP_ZONE or visitor:class_name() ~= "Avatar" or not visitor:is_real() then return end
    self.entered = self.entered + 1
    local events = self:fire_output("OnTrigger", visitor, nil, 0)
    self:log(string.format("entity %d steps in: fires OnTrigger (%d events)", visitor:id(), events))
end

return Trigger
