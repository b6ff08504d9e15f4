-- Release one permit of a permit-expirable semaphore by id (Redisson
-- RPermitExpirableSemaphore tryRelease(id)).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  the channel, redisson_sc:{name}
-- KEYS[3]  the acquired permits, {name}:timeout
-- ARGV[1]  the permit id, 16 raw bytes
-- ARGV[2]  permits one id stands for, "1"
-- ARGV[3]  now, epoch ms
-- ARGV[4]  publish command: PUBLISH, SPUBLISH, or both separated by a space
--
-- A permit that is still in the set goes back to the available count, which is
-- published, even when its lease had ended and it was only waiting to be reclaimed.
--
-- Returns 1 when a live permit was released; 0 when the id is unknown, or when the
-- permit's lease had already ended (it was returned all the same, as in Redisson).
local semaphore, channel, timeouts = KEYS[1], KEYS[2], KEYS[3]
local id, permits, now, publish = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ends = redis.call('zscore', timeouts, id)
if redis.call('zrem', timeouts, id) == 0 then
    return 0
end
local available = redis.call('incrby', semaphore, permits)
for command in string.gmatch(publish, '%S+') do redis.call(command, channel, available) end
if tonumber(ends) <= tonumber(now) then
    return 0
end
return 1
