-- Take or re-enter a fair lock without queueing (Redisson RFairLock tryLock()).
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the waiter queue, redisson_lock_queue:{name}
-- KEYS[3]  the waiter timeouts, redisson_lock_timeout:{name}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-uuid>:<thread-number>"
-- ARGV[3]  now, epoch milliseconds (note: ARGV[3] and ARGV[4] are swapped relative to
--          fair_acquire.lua, as in Redisson)
-- ARGV[4]  the slot length in milliseconds, taken off every remaining waiter's timeout
--          when the caller takes the lock
--
-- Returns nil when the caller holds the lock afterwards, 1 when it does not. The caller
-- is never added to the queue.
local lock, queue, timeouts = KEYS[1], KEYS[2], KEYS[3]
local owner = ARGV[2]
local now = tonumber(ARGV[3])
local wait = tonumber(ARGV[4])

-- Purge stale heads (see fair_acquire.lua).
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
        redis.call('pexpire', lock, ARGV[1])
        return nil
    end
end

if redis.call('hexists', lock, owner) == 1 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, ARGV[1])
    return nil
end
return 1
