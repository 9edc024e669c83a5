-- Crowd.lua: bench/bench_lua.py's NPC, the same rules as crowd.c: a timer
-- every tick that spends energy, a think every two seconds that walks a few
-- metres, and a round trap that counts visitors.
local Crowd = { cell = {} }
local C = Crowd.cell

C.thinks = { "wander" }

function C:created()
    self:add_timer(100, 100, 1, 0)
    self:set_think("wander", math.floor(tessera.random() * 2000))
    self:add_trap(2, 3, "circle")
end

function C:timer(timer_id, tag, user_data)
    local energy = self.energy + 1
    if energy > 1000 then energy = 0 end
    self.energy = energy
end

function C:wander()
    local x, y, z = self:position()
    local dx = (tessera.random() - 0.5) * 16
    local dz = (tessera.random() - 0.5) * 16
    self:move_to_point(x + dx, y, z + dz, 2, 0.2, true, 0)
    self:set_think("wander", 2000)
end

function C:entered_trap(tag, other)
    self.visits = self.visits + 1
end

return Crowd
