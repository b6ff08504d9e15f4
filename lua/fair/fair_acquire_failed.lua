-- Leave a fair lock's queue after giving up (Redisson RFairLock acquireFailed). Runs
-- after lib/fair_queue.lua.
--
-- KEYS[1]  the waiter queue, redisson_lock_queue:{name}
-- KEYS[2]  the waiter timeouts, redisson_lock_timeout:{name}
-- KEYS[3]  the lock hash
-- KEYS[4]  the lock's channel, redisson_lock__channel:{name}; a waiter's own channel is
--          this plus ":<owner>"
-- ARGV[1]  owner field of the waiter that gives up
-- ARGV[2]  that waiter's slot length in milliseconds
-- ARGV[3]  the unlock message, "0"
-- ARGV[4]  publish command: PUBLISH, SPUBLISH, or both separated by a space
--
-- Every waiter behind the leaving one moves up one slot (its timeout drops by ARGV[2]);
-- the leaving waiter is removed from the list and the sorted set. Returns 1 when it had
-- been queued, 0 when it had not.
--
-- One addition to Redisson's script: when the lock is free and a waiter is now at the
-- head, that waiter is told on its own channel. An unlock that happened just before may
-- have notified the waiter that is leaving now; without this the new head would sleep
-- until its TTL bound. To a Redisson waiter the message is an ordinary wake-up.
local queue, timeouts, lock, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, wait, message, publish = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local waiting = redis.call('lrange', queue, 0, -1)
local i = 1
while i <= #waiting and waiting[i] ~= owner do
    i = i + 1
end
for j = i + 1, #waiting do
    redis.call('zincrby', timeouts, -wait, waiting[j])
end
local removed = redis.call('zrem', timeouts, owner)
redis.call('lrem', queue, 0, owner)
if redis.call('exists', lock) == 0 then
    tell_head(queue, channel, message, publish)
end
if removed == 1 or i <= #waiting then
    return 1
end
return 0
