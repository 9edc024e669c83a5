-- Census.lua -- one base in the whole cluster, the singleton service
-- "census" (game.lua asks for it on every baseapp): every Avatar made tells
-- it joined(who), every one destroyed left(who); count(from) answers the
-- asker's client with onCensus(players).
local Census = { base = {} }
local B = Census.base

function B:joined(caller, who)
    self.players = self.players + 1
end

function B:left(caller, who)
    if self.players > 0 then self.players = self.players - 1 end
end

function B:count(caller, from)
    pcall(self.call_client, self, from, "Avatar", "onCensus", self.players)
end

-- Its name is the engine's to give up (the singleton service); this
-- baseapp stops calling it until it hears of the next one.
function B:destroyed()
    if tessera.kept.census_id == self:id() then tessera.kept.census_id = nil end
end

return Census
