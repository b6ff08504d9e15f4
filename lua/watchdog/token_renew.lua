-- Renew many string-token locks at once (the watchdog's batch for token locks): each key
-- is extended only while it holds the given token, the compare-and-PEXPIRE of redsync's
-- extend script.
--
-- KEYS[i]    a lock key
-- ARGV[1]    the lease in milliseconds
-- ARGV[i+1]  the token this client holds KEYS[i] with
--
-- Returns an array: element i is 1 when KEYS[i] still holds its token (its TTL is now at
-- least the lease; a longer one, set by an explicit extend, is kept), 0 when it does not
-- (gone, another token, or a key of another type, which does not fail the batch), so the
-- caller can report that hold as lost.
local lease = tonumber(ARGV[1])

local renewed = {}
for i = 1, #KEYS do
    local held = redis.pcall('get', KEYS[i])
    if held == ARGV[i + 1] then
        if redis.call('pttl', KEYS[i]) < lease then
            redis.call('pexpire', KEYS[i], lease)
        end
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
