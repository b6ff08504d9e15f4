-- Set the total number of permits of a permit-expirable semaphore (Redisson
-- RPermitExpirableSemaphore setPermits).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- KEYS[3]  the acquired permits, {name}:timeout
-- ARGV[1]  the new total p, acquired permits included
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
--
-- A missing semaphore is created with p available permits. Otherwise the available
-- count moves by p minus (available + acquired), so that acquired permits count against
-- the new total. Publishes p either way.
--
-- Returns the available count afterwards.
local available
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[1])
    available = tonumber(ARGV[1])
else
    local total = tonumber(redis.call('get', KEYS[1])) + redis.call('zcard', KEYS[3])
    available = redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - total)
end
redis.call(ARGV[2], KEYS[2], ARGV[1])
return available
