-- Delete a read-write lock held in read mode, whoever holds it (Redisson RReadLock
-- forceUnlock).
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- ARGV[1]  the read-unlock message, "0"
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
--
-- Returns 1 when the lock was in read mode and was deleted (and "0" published), else 0.
-- Read-hold timeout keys are left to expire.
if redis.call('hget', KEYS[1], 'mode') == 'read' then
    redis.call('del', KEYS[1])
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
