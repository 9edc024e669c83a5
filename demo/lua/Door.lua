-- Door.lua -- a door of the map (demo/game/demo_world.c): inputs Open,
-- Close and Toggle set `open` (every client that sees it gets it) and fire
-- OnOpened or OnClosed; the game event door_changed(door, open) goes to
-- every client in the space (the gate is heard, not only seen).
local calls = require("calls")

local Door = { cell = {} }
local C = Door.cell

C.inputs = { Open = "string", Close = "string", Toggle = "string" }

local function set(self, open, activator)
    if self.open == open then return end
    self.open = open
    if open then self.opened_count = self.opened_count + 1 end
    self:log(string.format("the door '%s' %s", self:lookup_name(), open and "opens" or "closes"))
    self:fire_output(open and "OnOpened" or "OnClosed", activator)
    calls.try(self, "fire_event", "door_changed", { door = self, open = open }, "space")
end

function C:Open(activator, caller, value) set(self, true, activator) end
function C:Close(activator, caller, value) set(self, false, activator) end
function C:Toggle(activator, caller, value) set(self, not self.open, activator) end

return Door
