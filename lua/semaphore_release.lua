-- Give permits back to a semaphore (Redisson RSemaphore release).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- ARGV[1]  permits released (at least 1)
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
--
-- Publishes the new number of available permits, which wakes that many waiters.
-- Returns that number.
local semaphore, channel = KEYS[1], KEYS[2]
local permits, publish = ARGV[1], ARGV[2]
local available = redis.call('incrby', semaphore, permits)
redis.call(publish, channel, available)
return available
