-- Return acquired permits of a permit-expirable semaphore, whoever holds them
-- (`redmutex unlock NAME --force`, or `--owner PERMIT-ID`).
--
-- KEYS[1]  the semaphore (available permits)
-- KEYS[2]  the channel, redisson_sc:{name}
-- KEYS[3]  the acquired permits, {name}:timeout
-- ARGV[1]  publish command: PUBLISH, SPUBLISH, or both separated by a space
-- ARGV[2..]  the permit ids to return, 16 raw bytes each; none: every acquired permit
--
-- Returns the number of permits returned. When it is positive the new available count
-- is published, as Redisson's release publishes it, so that waiters wake.
local semaphore, channel, timeouts = KEYS[1], KEYS[2], KEYS[3]
local publish = ARGV[1]
local removed = 0
if #ARGV == 1 then
    removed = redis.call('zcard', timeouts)
    redis.call('del', timeouts)
else
    for i = 2, #ARGV do
        removed = removed + redis.call('zrem', timeouts, ARGV[i])
    end
end
if removed > 0 then
    local available = redis.call('incrby', semaphore, removed)
    for command in string.gmatch(publish, '%S+') do redis.call(command, channel, available) end
end
return removed
