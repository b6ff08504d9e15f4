-- Add permits to (or, with a negative number, take them from) a semaphore, refusing a
-- count that Java's int cannot hold (Redisson RSemaphore addPermits, plus a range check
-- Redisson lacks; addPermits(-n) is Redisson's only way to reduce).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- ARGV[1]  permits to add, may be negative
-- ARGV[2]  publish command: PUBLISH, SPUBLISH, or both separated by a space
--
-- A missing semaphore counts as 0. The count is written with SET, which drops a TTL, as
-- Redisson's addPermits does. A new count outside -2147483648..2147483647 is refused with
-- the error PERMITS_OUT_OF_RANGE and nothing changes. The new count is published only
-- when it is positive: Redisson publishes it always, but a message of 0 wakes nobody and
-- a negative one makes a Java listener throw.
--
-- Returns the new count.
local semaphore, channel = KEYS[1], KEYS[2]
local permits, publish = tonumber(ARGV[1]), ARGV[2]
local int_min, int_max = -2147483648, 2147483647

local current = redis.call('get', semaphore)
-- A string that is not a count is someone else's value: refuse it rather than overwrite it.
if current and tonumber(current) == nil then
    return redis.error_reply('WRONGTYPE the key holds a string that is not a permit count')
end
local available = (tonumber(current) or 0) + permits
if available < int_min or available > int_max then
    return redis.error_reply('PERMITS_OUT_OF_RANGE the count would leave the Java int range')
end
redis.call('set', semaphore, available)
if available > 0 then
    for command in string.gmatch(publish, '%S+') do redis.call(command, channel, available) end
end
return available
