-- Give an acquired permit a new lease end (Redisson RPermitExpirableSemaphore
-- updateLeaseTime). Runs after
-- lib/permits.lua.
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- KEYS[3]  the acquired permits, {name}:timeout
-- ARGV[1]  the permit id, 16 raw bytes
-- ARGV[2]  the new lease end, epoch ms
-- ARGV[3]  now, epoch ms
-- ARGV[4]  publish command: PUBLISH, SPUBLISH, or both separated by a space
--
-- Expired permits are reclaimed first (see permit_counts.lua), so a permit whose lease
-- already ended cannot be revived.
--
-- Returns 1 when the permit was acquired and got the new lease end, 0 when it was not.
local semaphore, channel, timeouts = KEYS[1], KEYS[2], KEYS[3]
local id, lease_end, now, publish = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
reclaim_expired(semaphore, timeouts, channel, now, publish, nil)
if redis.call('zscore', timeouts, id) then
    redis.call('zadd', timeouts, lease_end, id)
    return 1
end
return 0
