-- Count a permit-expirable semaphore's permits after reclaiming expired ones (Redisson
-- RPermitExpirableSemaphore availablePermits, getPermits, acquiredPermits). Runs after
-- lib/permits.lua.
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- KEYS[3]  the acquired permits, {name}:timeout
-- ARGV[1]  now, epoch ms
-- ARGV[2]  publish command: PUBLISH, SPUBLISH, or both separated by a space
--
-- Permits whose lease ended go back to the available count (published when positive).
--
-- Returns {available, acquired}: the available count (0 for a missing semaphore) and
-- the number of permits still acquired.
local semaphore, channel, timeouts = KEYS[1], KEYS[2], KEYS[3]
local now, publish = tonumber(ARGV[1]), ARGV[2]
reclaim_expired(semaphore, timeouts, channel, now, publish, nil)
local available = tonumber(redis.call('get', semaphore) or 0)
return {available, redis.call('zcard', timeouts)}
