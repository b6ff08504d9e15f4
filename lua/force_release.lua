-- Delete a lock whoever holds it (Redisson RLock forceUnlock).
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the unlock channel, redisson_lock__channel:{name}
-- ARGV[1]  the unlock message, "0"
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
--
-- Returns 1 when a lock was deleted (and waiters were told), 0 when there was none.
local lock, channel = KEYS[1], KEYS[2]
local message, publish = ARGV[1], ARGV[2]
if redis.call('del', lock) == 1 then
    redis.call(publish, channel, message)
    return 1
end
return 0
