-- Add permits to (or take them from) a permit-expirable semaphore (Redisson
-- RPermitExpirableSemaphore addPermits).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- ARGV[1]  permits to add p, may be negative
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
--
-- A missing semaphore counts as 0. Publishes p itself (not the new count), and only when
-- p is positive, as Redisson does.
--
-- Returns the available count afterwards.
local semaphore, channel = KEYS[1], KEYS[2]
local delta, publish = ARGV[1], ARGV[2]
local available = tonumber(redis.call('get', semaphore) or 0) + tonumber(delta)
redis.call('set', semaphore, available)
if tonumber(delta) > 0 then
    redis.call(publish, channel, delta)
end
return available
