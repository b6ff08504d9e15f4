-- Take permits from a semaphore if there are enough (Redisson RSemaphore tryAcquire).
--
-- KEYS[1]  the semaphore: a string holding the number of available permits
-- ARGV[1]  permits wanted (at least 1)
--
-- Returns 1 when the permits were taken, 0 when fewer are available (or the semaphore
-- does not exist).
local available = redis.call('get', KEYS[1])
if available ~= false and tonumber(available) >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    return 1
end
return 0
