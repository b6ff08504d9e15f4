-- Take permits from a permit-expirable semaphore (Redisson RPermitExpirableSemaphore
-- tryAcquire). Runs after lib/permits.lua.
--
-- KEYS[1]  the semaphore: a string holding the number of available permits
-- KEYS[2]  the acquired permits, {name}:timeout: a sorted set of 16-byte permit ids
--          scored by lease end (epoch ms), or by 922337203685477 for "no lease"
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  permits wanted n (at least 1)
-- ARGV[2]  lease end of the new permits, epoch ms, or ARGV[4] for no lease
-- ARGV[3]  now, epoch ms
-- ARGV[4]  the "no lease" score, 922337203685477
-- ARGV[5]  publish command: PUBLISH, SPUBLISH, or both separated by a space
-- ARGV[6..5+n]  the new permits' ids, 16 raw bytes each
--
-- First reclaims up to n permits whose lease ended: they go back to the available count,
-- which is published when positive. Then takes n permits if there are enough; the
-- permits' sorted set follows the semaphore's TTL, if it has one.
--
-- Returns 0 when the permits were taken. Otherwise the milliseconds until the earliest
-- acquired permit's lease ends (a retry could reclaim it then), or -1 when no acquired
-- permit has a lease (only a release can help). Redisson answers "OK", ":<lease end>" or
-- nil; the keys change the same way.
local semaphore, timeouts, channel = KEYS[1], KEYS[2], KEYS[3]
local n, lease_end, now = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local no_lease, publish = tonumber(ARGV[4]), ARGV[5]
reclaim_expired(semaphore, timeouts, channel, now, publish, n)
local available = redis.call('get', semaphore)
if available ~= false and tonumber(available) >= n then
    redis.call('decrby', semaphore, n)
    for i = 1, n do
        redis.call('zadd', timeouts, lease_end, ARGV[5 + i])
    end
    local ttl = redis.call('pttl', semaphore)
    if ttl > 0 then
        redis.call('pexpire', timeouts, ttl)
    end
    return 0
end
local nearest = redis.call('zrange', timeouts, 0, 0, 'withscores')
if nearest[1] and tonumber(nearest[2]) ~= no_lease then
    return math.max(1, tonumber(nearest[2]) - now)
end
return -1
