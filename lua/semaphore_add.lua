-- Add permits to (or, with a negative number, take them from) a semaphore (Redisson
-- RSemaphore addPermits / reducePermits).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- ARGV[1]  permits to add, may be negative
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
--
-- A missing semaphore counts as 0 permits. Publishes the new count.
--
-- Returns the new count.
local available = tonumber(redis.call('get', KEYS[1]) or 0) + tonumber(ARGV[1])
redis.call('set', KEYS[1], available)
redis.call(ARGV[2], KEYS[2], available)
return available
