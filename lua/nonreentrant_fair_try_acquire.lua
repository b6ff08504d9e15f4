-- Take a non-reentrant fair lock without queueing (Redisson
-- RedissonNonReentrantFairLock tryLock(), 4.4.0+).
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the waiter queue, redisson_lock_queue:{name}
-- KEYS[3]  the waiter timeouts, redisson_lock_timeout:{name}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-uuid>:<thread-number>"
-- ARGV[3]  now, epoch milliseconds (ARGV[3] and ARGV[4] are swapped relative to
--          nonreentrant_fair_acquire.lua, as in Redisson)
-- ARGV[4]  the slot length in milliseconds, taken off every remaining waiter's timeout
--          when the caller takes the lock
--
-- Returns nil when the lock was free (and the caller first in line) and the caller now
-- holds it; an error whose code is NON_REENTRANT_REACQUIRE, with nothing changed, when
-- the caller already holds it; 1 otherwise. The caller is never added to the queue.
local lock, queue, timeouts = KEYS[1], KEYS[2], KEYS[3]
local lease, owner = ARGV[1], ARGV[2]
local now = tonumber(ARGV[3])
local wait = tonumber(ARGV[4])
-- Two words, so that Redis keeps the first as the error code.
local reacquire = 'NON_REENTRANT_REACQUIRE the lock is already held by this owner'

-- Purge stale heads (see nonreentrant_fair_acquire.lua).
while true do
    local head = redis.call('lindex', queue, 0)
    if not head then
        break
    end
    local ends = redis.call('zscore', timeouts, head)
    if ends and tonumber(ends) <= now then
        redis.call('zrem', timeouts, head)
        redis.call('lpop', queue)
    else
        break
    end
end

if redis.call('exists', lock) == 0 then
    local head = redis.call('lindex', queue, 0)
    if not head or head == owner then
        redis.call('lpop', queue)
        redis.call('zrem', timeouts, owner)
        local waiting = redis.call('zrange', timeouts, 0, -1)
        for i = 1, #waiting do
            redis.call('zincrby', timeouts, -wait, waiting[i])
        end
        redis.call('hset', lock, owner, 1)
        redis.call('pexpire', lock, lease)
        return nil
    end
end

if redis.call('hexists', lock, owner) == 1 then
    return redis.error_reply(reacquire)
end
return 1
