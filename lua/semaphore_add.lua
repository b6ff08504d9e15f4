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
local semaphore, channel = KEYS[1], KEYS[2]
local delta, publish = ARGV[1], ARGV[2]
local available = tonumber(redis.call('get', semaphore) or 0) + tonumber(delta)
redis.call('set', semaphore, available)
redis.call(publish, channel, available)
return available
