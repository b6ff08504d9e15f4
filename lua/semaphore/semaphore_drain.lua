-- Take every available permit of a semaphore (Redisson RSemaphore drainPermits).
--
-- KEYS[1]  the semaphore
-- ARGV[]   none
--
-- Returns how many permits were available (0 when there is no semaphore); the count is
-- 0 afterwards.
local semaphore = KEYS[1]
local available = redis.call('get', semaphore)
if available == false then
    return 0
end
-- A string that is not a count is someone else's value: refuse it rather than zero it.
if tonumber(available) == nil then
    return redis.error_reply('WRONGTYPE the key holds a string that is not a permit count')
end
redis.call('set', semaphore, 0)
return tonumber(available)
