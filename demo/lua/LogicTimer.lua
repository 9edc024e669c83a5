-- LogicTimer.lua -- a timer of the map (demo/game/demo_world.c): fires
-- OnTimer every `interval` seconds (a keyvalue), from a named think that
-- travels with it.
local LogicTimer = { cell = {} }
local C = LogicTimer.cell

C.thinks = { "tick" }

-- The timer's next tick, `interval` seconds from now.
local function schedule(self)
    local interval = self.interval
    self:set_think("tick", interval > 0.1 and math.floor(interval * 1000) or 100)
end

function C:created()
    schedule(self)
end

-- The think "tick" (self:tick(), the engine's method, is the cell's tick
-- number: a think is found in this table, not on the entity).
C["tick"] = function(self)
    self.fired = self.fired + 1
    self:fire_output("OnTimer", nil, nil, 0)
    schedule(self)
end

return LogicTimer
