-- Give an acquired permit a new lease end (Redisson RPermitExpirableSemaphore
-- updateLeaseTime).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- KEYS[3]  the acquired permits, {name}:timeout
-- ARGV[1]  the permit id, 16 raw bytes
-- ARGV[2]  the new lease end, epoch ms
-- ARGV[3]  now, epoch ms
-- ARGV[4]  publish command, PUBLISH or SPUBLISH
--
-- Expired permits are reclaimed first (see permit_counts.lua), so a permit whose lease
-- already ended cannot be revived.
--
-- Returns 1 when the permit was acquired and got the new lease end, 0 when it was not.
local reclaimed = redis.call('zremrangebyscore', KEYS[3], 0, ARGV[3])
if reclaimed > 0 then
    local available = redis.call('incrby', KEYS[1], reclaimed)
    if available > 0 then
        redis.call(ARGV[4], KEYS[2], available)
    end
end
if redis.call('zscore', KEYS[3], ARGV[1]) then
    redis.call('zadd', KEYS[3], ARGV[2], ARGV[1])
    return 1
end
return 0
