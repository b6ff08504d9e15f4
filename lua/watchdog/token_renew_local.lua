#!lua flags=allow-cross-slot-keys
-- Renew many string-token locks of one cluster master at once: the per-node form of
-- token_renew.lua, with the keys named in ARGV for the reason given in renew_local.lua
-- (declared KEYS may not span slots).
--
-- KEYS[]     none
-- ARGV[1]    the lease in milliseconds
-- ARGV[2i]   a lock key, ARGV[2i+1] the token this client holds it with
--
-- Returns an array with one element per lock: 1 when the key still holds its token (its
-- TTL is now at least the lease; a longer one is kept), 0 when it does not (gone, another
-- token, another type), -1 when this node could not look (the key's slot is served
-- elsewhere, or is migrating and the key already left): the caller asks the key's owner
-- itself before it calls the hold lost.
local lease = tonumber(ARGV[1])

local renewed = {}
for i = 2, #ARGV, 2 do
    local key, token = ARGV[i], ARGV[i + 1]
    local held = redis.pcall('get', key)
    if type(held) == 'table' then
        local err = tostring(held.err or held)
        if string.find(err, 'WRONGTYPE', 1, true) then
            renewed[#renewed + 1] = 0
        else
            renewed[#renewed + 1] = -1
        end
    elseif held == token then
        if redis.call('pttl', key) < lease then
            redis.call('pexpire', key, lease)
        end
        renewed[#renewed + 1] = 1
    else
        renewed[#renewed + 1] = 0
    end
end
return renewed
