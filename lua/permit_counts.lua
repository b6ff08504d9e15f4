-- Count a permit-expirable semaphore's permits after reclaiming expired ones (Redisson
-- RPermitExpirableSemaphore availablePermits, getPermits, acquiredPermits).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- KEYS[3]  the acquired permits, {name}:timeout
-- ARGV[1]  now, epoch ms
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
--
-- Permits whose lease ended go back to the available count (published when positive).
--
-- Returns {available, acquired}: the available count (0 for a missing semaphore) and
-- the number of permits still acquired.
local reclaimed = redis.call('zremrangebyscore', KEYS[3], 0, ARGV[1])
if reclaimed > 0 then
    local available = redis.call('incrby', KEYS[1], reclaimed)
    if available > 0 then
        redis.call(ARGV[2], KEYS[2], available)
    end
end
local available = tonumber(redis.call('get', KEYS[1]) or 0)
return {available, redis.call('zcard', KEYS[3])}
