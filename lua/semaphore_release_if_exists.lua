-- Give permits back to a semaphore only if it exists (Redisson RSemaphore
-- releaseIfExists).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- ARGV[1]  permits released (at least 1)
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
--
-- Returns 1 after a release (the new count was published), 0 when there is no semaphore.
local semaphore, channel = KEYS[1], KEYS[2]
local permits, publish = ARGV[1], ARGV[2]
if redis.call('exists', semaphore) == 0 then
    return 0
end
local available = redis.call('incrby', semaphore, permits)
redis.call(publish, channel, available)
return 1
