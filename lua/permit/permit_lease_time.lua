-- The remaining lease of an acquired permit (Redisson RPermitExpirableSemaphore
-- getLeaseTime). Runs after
-- lib/permits.lua.
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- KEYS[3]  the acquired permits, {name}:timeout
-- ARGV[1]  the permit id, 16 raw bytes
-- ARGV[2]  now, epoch ms
-- ARGV[3]  publish command: PUBLISH, SPUBLISH, or both separated by a space
-- ARGV[4]  the "no lease" score, 922337203685477
--
-- Expired permits are reclaimed first (see permit_counts.lua).
--
-- Returns the milliseconds left (at least 0), -1 for a permit without lease, -2 when the
-- permit is not acquired (Redisson answers 0 there and throws).
local semaphore, channel, timeouts = KEYS[1], KEYS[2], KEYS[3]
local id, now, publish, no_lease = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
reclaim_expired(semaphore, timeouts, channel, now, publish, nil)
local ends = redis.call('zscore', timeouts, id)
if not ends then
    return -2
end
if tonumber(ends) == no_lease then
    return -1
end
return math.max(0, tonumber(ends) - now)
