-- Avatar.lua -- the player, both halves: the cell rules of
-- demo/game/demo_cell.c and the base rules of demo/game/demo_base.c, the
-- same rule for rule (the bots cannot tell the two demos apart).
--
-- Cell: walking raises `level` (one per 50 m) and with it `equipment`;
-- each move restores a point of `mana`. castSpell(spell_id, target) costs 5
-- mana, records the spell in `buffs` and `secret_note`, and calls
-- target.takeDamage -- only on a target the caster's client can see -- and
-- tells the caster (and a player target) with the user message spell_hit.
-- A heartbeat timer counts in `heartbeats` every half second; ping(n) and
-- relayPing(n) count numbered calls; teleport(space, x, y, z) is the demo's
-- GM command.
--
-- Base: named once with a display name (names.lua); player_joined to
-- everyone when made, welcome(name) to its own client at each login; chat
-- earns gold; poke, echoTo and census call other bases; the Census hears
-- of every Avatar made and destroyed.
local calls = require("calls")
local combat = require("combat")
local names = require("names")

local Avatar = { cell = {}, base = {} }
local C, B = Avatar.cell, Avatar.base

local TIMER_HEARTBEAT = 1
-- Half a second: often enough for the timer test to see dozens of firings
-- across offloads, rare enough to cost nothing.
local HEARTBEAT_MS = 500

-- ---- cell ---------------------------------------------------------------

function C:created()
    self.born_ms = tessera.wall_ms()
    self:add_timer(HEARTBEAT_MS, HEARTBEAT_MS, TIMER_HEARTBEAT, 0)
end

function C:timer(timer_id, tag, user_data)
    if tag == TIMER_HEARTBEAT then self.heartbeats = self.heartbeats + 1 end
end

-- Its cellapp died and this one brought it back, as it was state_age_ms
-- ago; the demo counts, and says so now and then.
function C:restored(state_age_ms, from_ghost)
    local kept = tessera.kept
    kept.avatars_restored = (kept.avatars_restored or 0) + 1
    local restored = kept.avatars_restored
    if restored == 1 or restored % 100 == 0 then
        self:log(string.format("demo: restored from %s, %d ms old (%d Avatars restored here)",
            from_ghost and "its ghost" or "its backup", state_age_ms, restored))
    end
end

function C:moved(metres)
    local walked = self.walked + metres
    self.walked = walked
    local level = math.min(1 + math.floor(walked / 50.0), 255)
    if level ~= self.level then
        self.level = level
        self:set("equipment.weapon", level * 10)
        self:set("equipment.armor", level * 5)
    end
    local mana = self.mana
    if mana < 50 then self.mana = mana + 1 end
end

function C:castSpell(caller, spell_id, target_id)
    if caller ~= self:id() then return end -- only the caster casts
    local target = target_id ~= 0 and tessera.resolve(target_id) or nil
    -- The reach rule: a target is one the caster's client can see.
    if target_id ~= 0 and (not target or not self:in_view(target)) then
        self:log(string.format("castSpell on entity %d refused: not in its view", target_id))
        return
    end
    local mana = self.mana
    if mana < 5 then return end
    self.mana = mana - 5
    self:set(string.format("buffs[%d]", spell_id % 8), spell_id)
    self.secret_note = string.format("spell %d at tick %d", spell_id, self:tick())
    -- Avatars and guards take damage; doors, plates and timers do not.
    if not target or target:id() == self:id() then return end
    local class = target:class_name()
    if class ~= "Avatar" and class ~= "Npc" then return end
    local amount = spell_id % 20 + 1
    calls.try(self, "call_cell", target, "takeDamage", amount, self)
    -- A user message: the caster's client and the target's (if it is a
    -- player) hear of the hit, wherever the target's real is.
    local recipients = class == "Avatar" and { self:id(), target_id } or { self:id() }
    calls.try(self, "send_event", "spell_hit",
        { caster = self, target = target_id, spell_id = spell_id, amount = amount }, recipients)
end

C.takeDamage = combat.take_damage

-- A numbered call: from the avatar's own client (through its base) or its
-- base; each should be the last plus one.
function C:ping(caller, n)
    if caller ~= self:id() then return end
    local last = self.ping_last
    if n ~= last + 1 then
        self.ping_disorder = self.ping_disorder + 1
        self:warn(string.format("ping %d after %d", n, last))
    end
    self.ping_last = n
    self.pings = self.pings + 1
end

function C:teleport(caller, space, x, y, z)
    if caller ~= self:id() then return end
    calls.try(self, "teleport", space, x, y, z)
end

-- ---- base ---------------------------------------------------------------

-- The global Census's id, once this baseapp knows it (game.lua).
local function census_id()
    return tessera.kept.census_id
end

-- The Avatar's display name: the stored one, or, for an Avatar made just
-- now (or stored by a demo that named Avatars after their accounts), a new
-- one, set in `name` (persistent: it is written with the Avatar).
local function display_name(self)
    local name = self.name
    if #name > 0 and name ~= self:account() then return name end
    if not pcall(function() self.name = names.pick() end) then return "" end
    self:log("named " .. self.name)
    return self.name
end

function B:created()
    local name = display_name(self)
    if census_id() then calls.try(self, "call_base", census_id(), "Census", "joined", self) end
    -- Every client of the cluster, and every process's listeners, hear it.
    pcall(tessera.fire_event, "player_joined", { player = self, name = name }, "everyone", self)
end

-- A user message from the base: the player's own client is welcomed
-- whenever its Avatar gets it (a login, a reconnect).
function B:client_enabled()
    self:send_event("welcome", { name = self.name })
end

function B:destroyed()
    if census_id() and not tessera.stopping() then calls.try(self, "call_base", census_id(), "Census", "left", self) end
end

-- A poke, or a census question, that did not arrive tells the player's
-- client. (The census's joined and left need nothing: a census that is gone
-- is made again, and game.lua has everyone join it.)
function B:call_failed(target, part, method)
    if part == "base" and (method == "poked" or method == "count") then
        calls.try(self, "call_client", self, "Avatar", "onCallFailed", target)
    end
end

function B:chat(caller, text)
    self:debug("says: " .. text)
    self.gold = self.gold + 1
end

-- Numbered calls reach the cell on the base's stream as well as the client's.
function B:relayPing(caller, n)
    calls.try(self, "call_cell", "ping", n)
end

function B:poke(caller, target)
    calls.try(self, "call_base", target, "Avatar", "poked", self)
end

function B:poked(caller, from)
    calls.try(self, "call_client", self, "Avatar", "onPoked", from)
end

-- A round trip (bench/bench_base.py): echoTo -> target's echo -> our
-- echoed -> our client's onEcho.
function B:echoTo(caller, target, n)
    calls.try(self, "call_base", target, "Avatar", "echo", n, self)
end

function B:echo(caller, n, from)
    calls.try(self, "call_base", from, "Avatar", "echoed", n)
end

function B:echoed(caller, n)
    calls.try(self, "call_client", self, "Avatar", "onEcho", n)
end

-- The player always hears back: onCensus from the Census, or onCallFailed
-- when this baseapp does not know the Census yet (or the call is lost:
-- call_failed), so the client may ask again.
function B:census(caller)
    if census_id() then
        calls.try(self, "call_base", census_id(), "Census", "count", self)
    else
        calls.try(self, "call_client", self, "Avatar", "onCallFailed", 0)
    end
end

return Avatar
