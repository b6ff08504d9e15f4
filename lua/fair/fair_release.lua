-- Release one hold of a fair lock and hand the turn to the next waiter (Redisson
-- RFairLock unlock, with the unlock latch of 3.24.1+). Runs after lib/fair_queue.lua
-- and lib/latch.lua.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the waiter queue, redisson_lock_queue:{name}
-- KEYS[3]  the waiter timeouts, redisson_lock_timeout:{name}
-- KEYS[4]  the lock's channel, redisson_lock__channel:{name}; the next waiter's own
--          channel is this plus ":<owner>"
-- KEYS[5]  the latch key, redisson_unlock_latch:{name}:<request-id>
-- ARGV[1]  the unlock message, "0"
-- ARGV[2]  lease in milliseconds re-applied after a partial release
-- ARGV[3]  owner field "<client-uuid>:<thread-number>"
-- ARGV[4]  now, epoch milliseconds
-- ARGV[5]  publish command: PUBLISH, SPUBLISH, or both separated by a space
-- ARGV[6]  latch lifetime in milliseconds
--
-- Returns nil when the lock exists and the caller holds no hold; 0 when holds remain;
-- 1 when the lock was deleted (the next waiter, if any, was told on its own channel);
-- 2 when there was no lock at all. Redisson answers 1 in that last case and counts it
-- as a successful unlock; the next waiter is told all the same. A retry of the same
-- request returns the first outcome (2 replays as 1).
local lock, queue, timeouts, channel, latch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local message, lease, owner, now = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local publish, latch_ms = ARGV[5], ARGV[6]

local replay = replayed(latch)
if replay ~= nil then
    return replay
end
-- The turn must go to a live waiter.
purge_stale_heads(queue, timeouts, now)
if redis.call('exists', lock) == 0 then
    settled(latch, latch_ms, 1)
    tell_head(queue, channel, message, publish)
    return 2
end
local released = release_or_delete(lock, owner, lease, latch, latch_ms)
if released == 1 then
    tell_head(queue, channel, message, publish)
end
return released
