-- Delete a fair lock whoever holds it and hand the turn to the next waiter (Redisson
-- RFairLock forceUnlock).
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the waiter queue, redisson_lock_queue:{name}
-- KEYS[3]  the waiter timeouts, redisson_lock_timeout:{name}
-- KEYS[4]  the lock's channel, redisson_lock__channel:{name}
-- ARGV[1]  the unlock message, "0"
-- ARGV[2]  now, epoch milliseconds
-- ARGV[3]  publish command, PUBLISH or SPUBLISH
--
-- Returns 1 when a lock was deleted (the next waiter, if any, was told on its own
-- channel), 0 when there was none.
local lock, queue, timeouts = KEYS[1], KEYS[2], KEYS[3]
local now = tonumber(ARGV[2])
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
if redis.call('del', lock) == 1 then
    local head = redis.call('lindex', queue, 0)
    if head then
        redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1])
    end
    return 1
end
return 0
