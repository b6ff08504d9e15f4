-- TEST ONLY: the verification harness's seeded fair-lock bug (feature
-- verify-broken-fair-queue-jump, inert unless REDMUTEX_VERIFY_BROKEN=fair-queue-jump): a
-- queued waiter moves itself to the head of the queue, ahead of waiters that came first.
--
-- KEYS[1]  the fair lock's queue, redisson_lock_queue:{name}
-- ARGV[1]  the waiter's owner field
--
-- Returns nil.
if redis.call('lindex', KEYS[1], 0) ~= ARGV[1] then
    redis.call('lrem', KEYS[1], 0, ARGV[1])
    redis.call('lpush', KEYS[1], ARGV[1])
end
