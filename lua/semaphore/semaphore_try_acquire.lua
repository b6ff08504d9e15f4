-- Take permits from a semaphore if there are enough (Redisson RSemaphore tryAcquire).
--
-- KEYS[1]  the semaphore: a string holding the number of available permits
-- ARGV[1]  permits wanted (at least 1)
--
-- Returns 1 when the permits were taken, 0 when fewer are available (or the semaphore
-- does not exist).
local semaphore = KEYS[1]
local permits = ARGV[1]
local available = redis.call('get', semaphore)
if available ~= false and tonumber(available) == nil then
    return redis.error_reply('WRONGTYPE the key holds a string that is not a permit count')
end
if available ~= false and tonumber(available) >= tonumber(permits) then
    redis.call('decrby', semaphore, permits)
    return 1
end
return 0
