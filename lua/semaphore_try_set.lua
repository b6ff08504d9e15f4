-- Create a semaphore with a number of permits unless it exists (Redisson RSemaphore and
-- RPermitExpirableSemaphore trySetPermits).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- ARGV[1]  permits
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
-- ARGV[3]  time to live in milliseconds, or 0 for none
--
-- Returns 1 when the semaphore was created (and the count published), 0 when it existed.
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
if tonumber(ARGV[3]) > 0 then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3])
else
    redis.call('set', KEYS[1], ARGV[1])
end
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
