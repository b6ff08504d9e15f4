-- Create a semaphore with a number of permits unless it exists (Redisson RSemaphore and
-- RPermitExpirableSemaphore trySetPermits).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- ARGV[1]  permits
-- ARGV[2]  publish command: PUBLISH, SPUBLISH, or both separated by a space
-- ARGV[3]  time to live in milliseconds, or 0 for none
--
-- Returns 1 when the semaphore was created (and the count published), 0 when it existed.
local semaphore, channel = KEYS[1], KEYS[2]
local permits, publish, ttl = ARGV[1], ARGV[2], ARGV[3]
if redis.call('exists', semaphore) == 1 then
    return 0
end
if tonumber(ttl) > 0 then
    redis.call('set', semaphore, permits, 'px', ttl)
else
    redis.call('set', semaphore, permits)
end
for command in string.gmatch(publish, '%S+') do redis.call(command, channel, permits) end
return 1
