-- Set the total number of permits of a permit-expirable semaphore (Redisson
-- RPermitExpirableSemaphore setPermits).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- KEYS[3]  the acquired permits, {name}:timeout
-- ARGV[1]  the new total p, acquired permits included
-- ARGV[2]  publish command: PUBLISH, SPUBLISH, or both separated by a space
--
-- A missing semaphore is created with p available permits. Otherwise the available
-- count moves by p minus (available + acquired), so that acquired permits count against
-- the new total. Publishes p either way.
--
-- Returns the available count afterwards.
local semaphore, channel, timeouts = KEYS[1], KEYS[2], KEYS[3]
local permits, publish = ARGV[1], ARGV[2]
local available
if redis.call('exists', semaphore) == 0 then
    redis.call('set', semaphore, permits)
    available = tonumber(permits)
else
    local total = tonumber(redis.call('get', semaphore)) + redis.call('zcard', timeouts)
    available = redis.call('incrby', semaphore, tonumber(permits) - total)
end
for command in string.gmatch(publish, '%S+') do redis.call(command, channel, permits) end
return available
