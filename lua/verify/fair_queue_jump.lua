-- TEST ONLY: the verification harness's seeded fair-lock bug (feature
-- verify-broken-fair-queue-jump, inert unless REDMUTEX_VERIFY_BROKEN=fair-queue-jump): a
-- queued waiter moves itself to the head of the queue, ahead of waiters that came first.
--
-- KEYS[1]  the fair lock's queue, redisson_lock_queue:{name}
-- KEYS[2]  the lock's hash
-- ARGV[1]  the waiter's owner field
--
-- Only while the lock is held: its release then tells the jumper, which takes the lock
-- out of order (what the fair-order checker must see). A jump onto a free lock, whose
-- release already told the old head, would leave nobody told and stall the queue for a
-- slot, a liveness failure instead of an order one (seen on a loaded machine).
--
-- Returns nil.
if redis.call('exists', KEYS[2]) == 1 and redis.call('lindex', KEYS[1], 0) ~= ARGV[1] then
    redis.call('lrem', KEYS[1], 0, ARGV[1])
    redis.call('lpush', KEYS[1], ARGV[1])
end
