-- Return permits to a semaphore, refusing a count that Java's int cannot hold (Redisson
-- RSemaphore release(n) and releaseIfExists(n), plus a range check Redisson lacks).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- ARGV[1]  permits to return n, 0 or more
-- ARGV[2]  publish command: PUBLISH, SPUBLISH, or both separated by a space
-- ARGV[3]  '1' to change nothing when the semaphore does not exist (releaseIfExists),
--          '0' to count a missing semaphore as 0 (release)
--
-- The count is changed with INCRBY, so a TTL on the semaphore stays, and the new count
-- is published, as Redisson does. A Redisson client reads the count and every message as
-- a Java int, and its waiters throw on a wrapped value, so a count above 2147483647 is
-- refused with the error PERMITS_OUT_OF_RANGE and nothing changes.
--
-- Returns the new count; nil when ARGV[3] is '1' and the semaphore does not exist.
local semaphore, channel = KEYS[1], KEYS[2]
local permits, publish, only_existing = tonumber(ARGV[1]), ARGV[2], ARGV[3] == '1'
local int_max = 2147483647

local current = redis.call('get', semaphore)
if not current and only_existing then
    return nil
end
if (tonumber(current) or 0) + permits > int_max then
    return redis.error_reply('PERMITS_OUT_OF_RANGE the count would exceed 2147483647')
end
local available = redis.call('incrby', semaphore, permits)
for command in string.gmatch(publish, '%S+') do redis.call(command, channel, available) end
return available
