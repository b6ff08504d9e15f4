-- The permit-expirable semaphore's reclaim rule, shared by its scripts (prepended to
-- each at build time, see src/scripts.rs; the script itself follows this text).
--
-- semaphore: the string of available permits; timeouts: {name}:timeout, the sorted set
-- of acquired permit ids scored by the epoch millisecond their lease ends.

-- Returns acquired permits whose lease ended by `now` to the available count, at most
-- `limit` of them (nil: all), and publishes the new count when it is positive. Returns
-- how many were reclaimed.
local function reclaim_expired(semaphore, timeouts, channel, now, publish, limit)
    local reclaimed
    if limit then
        local expired = redis.call('zrangebyscore', timeouts, 0, now, 'limit', 0, limit)
        for i = 1, #expired do
            redis.call('zrem', timeouts, expired[i])
        end
        reclaimed = #expired
    else
        reclaimed = redis.call('zremrangebyscore', timeouts, 0, now)
    end
    if reclaimed > 0 then
        local available = redis.call('incrby', semaphore, reclaimed)
        if available > 0 then
            for command in string.gmatch(publish, '%S+') do redis.call(command, channel, available) end
        end
    end
    return reclaimed
end
