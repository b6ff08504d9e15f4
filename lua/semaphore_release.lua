-- Give permits back to a semaphore (Redisson RSemaphore release).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- ARGV[1]  permits released (at least 1)
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
--
-- Publishes the new number of available permits, which wakes that many waiters.
-- Returns that number.
local available = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], available)
return available
