-- Take or re-enter a fair lock without queueing (Redisson RFairLock tryLock()). Runs
-- after lib/fair_queue.lua.
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
local lease, owner = ARGV[1], ARGV[2]
local now = tonumber(ARGV[3])
local wait = tonumber(ARGV[4])

purge_stale_heads(queue, timeouts, now)
if take_in_turn(lock, queue, timeouts, owner, lease, wait) then
    return nil
end
return 1
