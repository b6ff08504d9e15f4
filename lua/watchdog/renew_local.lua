#!lua flags=allow-cross-slot-keys
-- Renew the leases of many locks of one cluster master at once. The per-node form of
-- renew.lua: a cluster refuses declared KEYS of several slots in one call (CROSSSLOT,
-- even with allow-cross-slot-keys), so the locks are named in ARGV and the flag lets
-- the script touch keys of every slot this node serves.
--
-- KEYS[]     none (see above)
-- ARGV[1]    new lease in milliseconds
-- ARGV[2i]   a lock hash, ARGV[2i+1] the owner field this client holds it with
--
-- Returns an array with one element per lock: 1 when the owner still holds it (its TTL
-- was reset to the lease), 0 when it does not (or the key has another type), -1 when
-- this node could not look (the key's slot is served elsewhere, or is migrating and
-- the key already left): the caller asks the key's owner itself before it calls the
-- hold lost.
local renewed = {}
for i = 2, #ARGV, 2 do
    local lock, owner = ARGV[i], ARGV[i + 1]
    local held = redis.pcall('hexists', lock, owner)
    if type(held) == 'table' then
        local err = tostring(held.err or held)
        if string.find(err, 'WRONGTYPE', 1, true) then
            renewed[#renewed + 1] = 0
        else
            renewed[#renewed + 1] = -1
        end
    elseif held == 1 then
        redis.call('pexpire', lock, ARGV[1])
        renewed[#renewed + 1] = 1
    else
        renewed[#renewed + 1] = 0
    end
end
return renewed
