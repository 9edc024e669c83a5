-- calls.lua -- engine calls whose refusal the demo lets pass, as its C
-- version does (demo/game/*.c ignore what call_base, move_to_point and the
-- like return): the engine has logged why, and the rule goes on.

local calls = {}

-- Calls object:method(...) and returns true, or false when the engine
-- refused it (the error a refusal raises is dropped: the log line before it
-- says why).
function calls.try(object, method, ...)
    return (pcall(object[method], object, ...))
end

return calls
