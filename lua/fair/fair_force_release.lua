-- Delete a fair lock whoever holds it and hand the turn to the next waiter (Redisson
-- RFairLock forceUnlock). Runs after lib/fair_queue.lua.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the waiter queue, redisson_lock_queue:{name}
-- KEYS[3]  the waiter timeouts, redisson_lock_timeout:{name}
-- KEYS[4]  the lock's channel, redisson_lock__channel:{name}
-- ARGV[1]  the unlock message, "0"
-- ARGV[2]  now, epoch milliseconds
-- ARGV[3]  publish command: PUBLISH, SPUBLISH, or both separated by a space
--
-- Returns 1 when a lock was deleted (the next waiter, if any, was told on its own
-- channel), 0 when there was none.
local lock, queue, timeouts, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local message, now, publish = ARGV[1], tonumber(ARGV[2]), ARGV[3]
purge_stale_heads(queue, timeouts, now)
if redis.call('del', lock) == 1 then
    tell_head(queue, channel, message, publish)
    return 1
end
return 0
