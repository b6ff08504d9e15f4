-- Take every available permit of a semaphore (Redisson RSemaphore drainPermits).
--
-- KEYS[1]  the semaphore
-- ARGV[]   none
--
-- Returns how many permits were available (0 when there is no semaphore); the count is
-- 0 afterwards.
local available = redis.call('get', KEYS[1])
if available == false then
    return 0
end
redis.call('set', KEYS[1], 0)
return tonumber(available)
