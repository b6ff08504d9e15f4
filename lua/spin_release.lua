-- Release one hold of a spin lock (Redisson RSpinLock unlock, with the unlock latch of
-- 3.24.1+).
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the latch key, redisson_unlock_latch:{name}:<request-id>
-- ARGV[1]  lease in milliseconds re-applied after a partial release
-- ARGV[2]  owner field "<client-uuid>:<thread-number>"
-- ARGV[3]  latch lifetime in milliseconds
--
-- Nothing is published: spin-lock waiters poll with back-off instead of listening, and
-- Redisson's spin lock publishes nothing either (an RLock waiter on the same name wakes
-- only at its TTL bound).
--
-- Returns nil when the caller holds no hold; 0 when holds remain; 1 when the lock was
-- deleted. A retry of the same request (same latch key) returns the first outcome again
-- instead of releasing a second hold.
local lock, latch = KEYS[1], KEYS[2]
local lease, owner, latch_ms = ARGV[1], ARGV[2], ARGV[3]

local replay = redis.call('get', latch)
if replay then
    return tonumber(replay)
end
if redis.call('hexists', lock, owner) == 0 then
    return nil
end
if redis.call('hincrby', lock, owner, -1) > 0 then
    redis.call('pexpire', lock, lease)
    redis.call('set', latch, 0, 'px', latch_ms)
    return 0
end
redis.call('del', lock)
redis.call('set', latch, 1, 'px', latch_ms)
return 1
