-- Release one hold of a fair lock and hand the turn to the next waiter (Redisson
-- RFairLock unlock, with the unlock latch of 3.24.1+).
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
-- ARGV[5]  publish command, PUBLISH or SPUBLISH
-- ARGV[6]  latch lifetime in milliseconds
--
-- Returns nil when the lock exists and the caller holds no hold; 0 when holds remain;
-- 1 when the lock was deleted (the next waiter, if any, was told on its own channel);
-- 2 when there was no lock at all. Redisson answers 1 in that last case and counts it
-- as a successful unlock; the next waiter is told all the same. A retry of the same
-- request returns the first outcome (2 replays as 1).
local replay = redis.call('get', KEYS[5])
if replay then
    return tonumber(replay)
end
local lock, queue, timeouts = KEYS[1], KEYS[2], KEYS[3]
local now = tonumber(ARGV[4])

-- Purge stale heads (see fair_acquire.lua), so that the turn goes to a live waiter.
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
    redis.call('set', KEYS[5], 1, 'px', ARGV[6])
    local head = redis.call('lindex', queue, 0)
    if head then
        redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1])
    end
    return 2
end
if redis.call('hexists', lock, ARGV[3]) == 0 then
    return nil
end
if redis.call('hincrby', lock, ARGV[3], -1) > 0 then
    redis.call('pexpire', lock, ARGV[2])
    redis.call('set', KEYS[5], 0, 'px', ARGV[6])
    return 0
end
redis.call('del', lock)
-- The latch is written before the publish: if the publish is refused (ACL), a retry
-- still sees that the release itself happened.
redis.call('set', KEYS[5], 1, 'px', ARGV[6])
local head = redis.call('lindex', queue, 0)
if head then
    redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1])
end
return 1
