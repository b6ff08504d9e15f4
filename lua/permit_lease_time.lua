-- The remaining lease of an acquired permit (Redisson RPermitExpirableSemaphore
-- getLeaseTime).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- KEYS[3]  the acquired permits, {name}:timeout
-- ARGV[1]  the permit id, 16 raw bytes
-- ARGV[2]  now, epoch ms
-- ARGV[3]  publish command, PUBLISH or SPUBLISH
-- ARGV[4]  the "no lease" score, 922337203685477
--
-- Expired permits are reclaimed first (see permit_counts.lua).
--
-- Returns the milliseconds left (at least 0), -1 for a permit without lease, -2 when the
-- permit is not acquired (Redisson answers 0 there and throws).
local reclaimed = redis.call('zremrangebyscore', KEYS[3], 0, ARGV[2])
if reclaimed > 0 then
    local available = redis.call('incrby', KEYS[1], reclaimed)
    if available > 0 then
        redis.call(ARGV[3], KEYS[2], available)
    end
end
local ends = redis.call('zscore', KEYS[3], ARGV[1])
if not ends then
    return -2
end
if tonumber(ends) == tonumber(ARGV[4]) then
    return -1
end
return math.max(0, tonumber(ends) - tonumber(ARGV[2]))
