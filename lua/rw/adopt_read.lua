-- After a read acquire whose connection closed before its reply (see adopt.lua, the same
-- check for the kinds kept in a plain hash; runs after lib/uncounted.lua): does the owner
-- have more read holds than its client counts, and how long do they live at least?
--
-- A read hold lives while the hash does, and the hash does not always keep its TTL: a
-- release by any reader cuts it to the longest remaining read-hold timeout key, and with
-- none left deletes it. So the owner's holds live at least as long as the shortest of the
-- hash's TTL and their own timeout keys' TTLs, read here in the same script as the count.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the owner's timeout-key prefix, {name}:<owner>:rwlock_timeout; read hold n
--          has the key KEYS[2]:n
-- ARGV[1]  read owner field "<client-uuid>:<thread-number>"
-- ARGV[2]  how many read holds of the owner its client counts
-- ARGV[3]  milliseconds: the hold is under the watchdog, so renew the owner's timeout keys
--          and the hash now to a TTL of at least this, as the watchdog's read renewal
--          does; 0 for an explicit lease (nothing is written then)
--
-- Returns nil when the owner has at most ARGV[2] read holds (nothing changes then).
-- Otherwise the least PTTL in milliseconds, after any renewal, of the hash and of the
-- owner's timeout keys 1..n: 0 when one of those keys is gone already (another reader's
-- release may count the owner out), -1 when none of them has a TTL.
local lock, own_timeouts = KEYS[1], KEYS[2]
local owner, counted, renew_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local held = holds_of(lock, owner)
if held <= counted then
    return nil
end
local least = -1
local function count(key)
    local ttl = renewed_ttl(key, renew_ms)
    if ttl == -2 then
        ttl = 0
    end
    if ttl >= 0 and (least < 0 or ttl < least) then
        least = ttl
    end
end
for i = 1, held do
    count(own_timeouts .. ':' .. i)
end
count(lock)
return least
