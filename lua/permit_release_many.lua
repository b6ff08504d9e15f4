-- Release several permits of a permit-expirable semaphore by id, all or none (Redisson
-- RPermitExpirableSemaphore tryRelease(ids)).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- KEYS[3]  the acquired permits, {name}:timeout
-- ARGV[1]  the number of ids n
-- ARGV[2]  now, epoch ms
-- ARGV[3]  publish command, PUBLISH or SPUBLISH
-- ARGV[4..3+n]  the permit ids, 16 raw bytes each
--
-- When any id is unknown or its lease has ended, nothing changes and 0 is returned.
-- Otherwise permits whose lease ended are reclaimed first (the new count is published
-- when positive), then the given permits are returned and their number published.
--
-- Returns the number of permits released.
local now = tonumber(ARGV[2])
for i = 4, #ARGV do
    local ends = redis.call('zscore', KEYS[3], ARGV[i])
    if not ends or tonumber(ends) <= now then
        return 0
    end
end
local reclaimed = redis.call('zremrangebyscore', KEYS[3], 0, now)
if reclaimed > 0 then
    local available = redis.call('incrby', KEYS[1], reclaimed)
    if available > 0 then
        redis.call(ARGV[3], KEYS[2], available)
    end
end
local removed = 0
for i = 4, #ARGV do
    removed = removed + redis.call('zrem', KEYS[3], ARGV[i])
end
redis.call('incrby', KEYS[1], removed)
redis.call(ARGV[3], KEYS[2], removed)
return removed
