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
redis.call('set', semaphore, 0)
return tonumber(available)
