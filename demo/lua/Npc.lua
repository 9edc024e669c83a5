-- Npc.lua -- the guards (demo/game/demo_cell.c): `npc_count` of them per
-- cellapp, spawned by game.lua in the default space's spawn disc. Each has
-- a trap of `npc_trap_radius`: every avatar stepping in counts as a
-- visitor, changes `mood`, `level` and `scale`, and is greeted with a call
-- of its base, Avatar.poked(from). With `npc_patrol_speed` above 0 a guard
-- patrols, navigating to random points near its post; with
-- `npc_chase_speed` above 0 it chases an avatar that steps into its trap
-- until it leaves the trap or is caught, then patrols again.
local calls = require("calls")
local combat = require("combat")
local settings = require("settings")

local Npc = { cell = {} }
local C = Npc.cell

-- A guard's own data, the C guard's field table (struct demo_npc): it
-- travels with the guard between cellapps, and a map's keyvalues of these
-- names land in it.
C.fields = {
    last_visitor = "entity",
    greeted = "uint32",
    post = "vector3", -- where it was spawned: its patrol's centre
    chasing = "entity", -- the avatar it chases (0: patrolling)
}

local TRAP_VISITORS = 1
-- What a guard's move is for (its user data).
local MOVE_PATROL, MOVE_CHASE = 1, 2
local CATCH_DISTANCE = 2.0
-- A guard's visitor count stops here (uint32).
local VISITORS_MAX = 0xFFFFFFFF

-- The next leg of a guard's patrol: a random point near its post.
local function patrol(self)
    local s = settings.get()
    self.chasing = 0
    if s.patrol_speed <= 0 then return end
    local post = self.post
    -- A few tries: a point may lie in a wall, or in a courtyard no path
    -- reaches.
    for _ = 1, 4 do
        local angle = tessera.random() * 2.0 * math.pi
        local distance = math.sqrt(tessera.random()) * s.patrol_radius
        local x, z = post.x + distance * math.cos(angle), post.z + distance * math.sin(angle)
        local moving, why = self:navigate(x, post.y, z, s.patrol_speed, 0, true, MOVE_PATROL)
        if moving then return end
        -- A space without a map: straight there.
        if why:find("no navigation mesh", 1, true) and
            calls.try(self, "move_to_point", x, post.y, z, s.patrol_speed, 0, true, MOVE_PATROL) then
            return
        end
    end
    -- Nowhere to go from here: back to the post itself, straight.
    calls.try(self, "move_to_point", post.x, post.y, post.z, s.patrol_speed, 0, true, MOVE_PATROL)
end

function C:created()
    local x, y, z = self:position()
    self.post = { x = x, y = y, z = z }
    self.name = "Guard-" .. self:id()
    self:add_trap(TRAP_VISITORS, settings.get().npc_trap_radius)
    patrol(self)
end

-- A patrol leg done, or its quarry caught: on with the patrol.
function C:controller_arrived(controller_id, user_data)
    patrol(self)
end

-- Its quarry went away.
function C:controller_failed(controller_id, user_data, reason)
    patrol(self)
end

function C:left_trap(tag, visitor)
    if tag == TRAP_VISITORS and self.chasing ~= 0 and visitor:id() == self.chasing then
        patrol(self) -- it got away
    end
end

function C:entered_trap(tag, visitor)
    if tag ~= TRAP_VISITORS or visitor:class_name() ~= "Avatar" then return end
    local s = settings.get()
    if s.chase_speed > 0 and self.chasing == 0 and
        calls.try(self, "move_to_entity", visitor, s.chase_speed, CATCH_DISTANCE, true, MOVE_CHASE) then
        self.chasing = visitor:id()
    end
    local visitors = math.min(self.visitors + 1, VISITORS_MAX)
    self.visitors = visitors
    self.mood = visitors % 256
    self.level = math.min(1 + visitors // 5, 255)
    self.scale = 0.5 + (visitors % 151) * 0.01
    -- The guard greets its visitor: a call of the visitor's base from this
    -- cell (Avatar.poked(from), which tells its client onPoked). Only the
    -- cellapp of the visitor's real greets, so a visit is greeted once.
    if not visitor:is_real() then return end
    self.last_visitor = visitor
    if calls.try(self, "call_base", visitor, "Avatar", "poked", self) then self.greeted = self.greeted + 1 end
end

C.takeDamage = combat.take_damage

return Npc
