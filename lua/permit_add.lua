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
local available = tonumber(redis.call('get', KEYS[1]) or 0) + tonumber(ARGV[1])
redis.call('set', KEYS[1], available)
if tonumber(ARGV[1]) > 0 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
return available
