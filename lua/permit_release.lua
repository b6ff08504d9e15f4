-- Release one permit of a permit-expirable semaphore by id (Redisson
-- RPermitExpirableSemaphore tryRelease(id)).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- KEYS[3]  the acquired permits, {name}:timeout
-- ARGV[1]  the permit id, 16 raw bytes
-- ARGV[2]  permits one id stands for, "1"
-- ARGV[3]  now, epoch ms
-- ARGV[4]  publish command, PUBLISH or SPUBLISH
--
-- A permit that is still in the set goes back to the available count, which is
-- published, even when its lease had ended and it was only waiting to be reclaimed.
--
-- Returns 1 when a live permit was released; 0 when the id is unknown, or when the
-- permit's lease had already ended (it was returned all the same, as in Redisson).
local ends = redis.call('zscore', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[3], ARGV[1]) == 0 then
    return 0
end
local available = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], available)
if tonumber(ends) <= tonumber(ARGV[3]) then
    return 0
end
return 1
