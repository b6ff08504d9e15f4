-- Release one hold of a reentrant lock (Redisson RLock unlock with the unlock latch
-- introduced in Redisson 3.24.1).
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the unlock channel, redisson_lock__channel:{name}
-- KEYS[3]  the latch key, redisson_unlock_latch:{name}:<request-id>
-- ARGV[1]  the unlock message, "0"
-- ARGV[2]  lease in milliseconds re-applied after a partial release
-- ARGV[3]  owner field "<client-uuid>:<thread-number>"
-- ARGV[4]  publish command, PUBLISH or SPUBLISH
-- ARGV[5]  latch lifetime in milliseconds
--
-- Returns nil when the caller holds no hold; 0 when holds remain; 1 when the lock was
-- deleted and the unlock message published. A retry of the same request (same latch
-- key) returns the first outcome again instead of releasing a second hold.
local replay = redis.call('get', KEYS[3])
if replay then
    return tonumber(replay)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[5])
    return 0
end
redis.call('del', KEYS[1])
-- The latch is written before the publish: if the publish is refused (ACL), a retry
-- still sees that the release itself happened.
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
redis.call(ARGV[4], KEYS[2], ARGV[1])
return 1
