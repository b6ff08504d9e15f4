#!lua flags=allow-cross-slot-keys
-- Delete many keys of one cluster master at once (the watchdog's spent unlock
-- latches), whatever their slots: one DEL may not name keys of several slots.
--
-- KEYS[]    none: the keys are named in ARGV (see renew_local.lua)
-- ARGV[i]   a key to delete
--
-- Returns the number of keys deleted. A key this node does not serve (its slot moved)
-- is skipped; latches expire on their own.
local deleted = 0
for i = 1, #ARGV do
    local n = redis.pcall('del', ARGV[i])
    if type(n) == 'number' then
        deleted = deleted + n
    end
end
return deleted
