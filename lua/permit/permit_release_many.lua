-- Release several permits of a permit-expirable semaphore by id, all or none (Redisson
-- RPermitExpirableSemaphore tryRelease(ids)). Runs after
-- lib/permits.lua.
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- KEYS[3]  the acquired permits, {name}:timeout
-- ARGV[1]  the number of ids n
-- ARGV[2]  now, epoch ms
-- ARGV[3]  publish command: PUBLISH, SPUBLISH, or both separated by a space
-- ARGV[4..3+n]  the permit ids, 16 raw bytes each
--
-- When any id is unknown or its lease has ended, nothing changes and 0 is returned.
-- Otherwise permits whose lease ended are reclaimed first (the new count is published
-- when positive), then the given permits are returned and their number published.
--
-- Returns the number of permits released.
local semaphore, channel, timeouts = KEYS[1], KEYS[2], KEYS[3]
local now, publish = tonumber(ARGV[2]), ARGV[3]
for i = 4, #ARGV do
    local ends = redis.call('zscore', timeouts, ARGV[i])
    if not ends or tonumber(ends) <= now then
        return 0
    end
end
reclaim_expired(semaphore, timeouts, channel, now, publish, nil)
local removed = 0
for i = 4, #ARGV do
    removed = removed + redis.call('zrem', timeouts, ARGV[i])
end
redis.call('incrby', semaphore, removed)
for command in string.gmatch(publish, '%S+') do redis.call(command, channel, removed) end
return removed
