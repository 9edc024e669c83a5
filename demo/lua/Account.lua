-- Account.lua -- what a client logs in to (demo/game/demo_base.c):
-- enterWorld() loads the account's Avatar (or makes it, the first time)
-- with its cell part, gives it the client (giveClientTo) and goes. `visits`
-- counts the entries.
local Account = { base = {} }
local B = Account.base

-- The Avatar is loaded (or could not be): the client goes to it.
local function avatar_loaded(account_id, loaded, why)
    local account = tessera.resolve(account_id)
    local avatar = loaded and tessera.resolve(loaded)
    if not account or not account:has_client() then
        if avatar then avatar:destroy(true, "its account left before it was ready") end
        return
    end
    if not avatar then
        account:warn(string.format("its Avatar could not be loaded (%s): it stays on its Account", why))
        return
    end
    if not account:give_client(avatar) then
        avatar:destroy(false, "its account could not give it the client")
        return
    end
    account:destroy(true, "its client went to its Avatar")
end

function B:enterWorld(caller)
    self.visits = self.visits + 1
    local account_id = self:id()
    local loading = tessera.load_base(self, "Avatar", self:account(), function(loaded, why)
        avatar_loaded(account_id, loaded, why)
    end)
    if not loading then self:log("enterWorld: a load is under way or Redis is unavailable") end
end

return Account
