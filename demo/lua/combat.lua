-- combat.lua -- what Avatars and guards share (demo/game/demo_cell.c,
-- demo_take_damage): takeDamage(amount, attacker), not exposed.

local combat = {}

-- `health` drops (and is 100 again at 0), and every client that sees the
-- entity hears onDamage(amount).
function combat.take_damage(self, caller, amount, attacker)
    local health = self.health - amount
    self.health = health <= 0 and 100 or health
    self:call_clients("onDamage", true, amount)
end

return combat
