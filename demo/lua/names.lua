-- names.lua -- the display names of the demo's players (demo/game/demo_names.c):
-- what other players see of someone (the Avatar's `name`, player_joined),
-- never the account name they log in with.
--
-- A display name is an adjective, a noun and a four-digit tag
-- ("QuietHeron#4821"), drawn once, when the Avatar is first made, from 32
-- random bits: the same lists and the same bits-to-name rule as the C demo.
-- The bits come from the baseapp's generator (tessera.random, seeded when
-- the process starts), never from anything about the account.

local ADJECTIVES = {
    "Quiet", "Brave", "Swift", "Amber", "Silver", "Hidden", "Bright", "Gentle", "Iron", "Misty", "Noble",
    "Rapid", "Silent", "Stout", "Wild", "Frosty", "Golden", "Lucky", "Mellow", "Proud", "Rusty", "Shy",
    "Sly", "Sunny", "Tidy", "Vivid", "Wise", "Witty", "Zesty", "Bold", "Calm", "Keen",
}

local NOUNS = {
    "Heron", "Otter", "Falcon", "Badger", "Lynx", "Raven", "Wren", "Marten", "Fox", "Hare", "Moth",
    "Newt", "Owl", "Pike", "Quail", "Stoat", "Toad", "Viper", "Wolf", "Yak", "Bison", "Crane",
    "Dingo", "Egret", "Finch", "Gecko", "Ibis", "Jackal", "Kestrel", "Lemur", "Magpie", "Robin",
}

local names = {}

-- The name 32 random bits make: the adjective from the lowest digits (base
-- 32), the noun from the next, the tag from what is left.
function names.from_bits(bits)
    local adjective = ADJECTIVES[bits % #ADJECTIVES + 1]
    bits = bits // #ADJECTIVES
    local noun = NOUNS[bits % #NOUNS + 1]
    bits = bits // #NOUNS
    return string.format("%s%s#%04d", adjective, noun, bits % 10000)
end

-- A new display name (at most 21 bytes).
function names.pick()
    return names.from_bits(math.floor(tessera.random() * 4294967296.0))
end

return names
