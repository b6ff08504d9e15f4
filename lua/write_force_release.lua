-- Delete a read-write lock held in write mode, whoever holds it (Redisson RWriteLock
-- forceUnlock).
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- ARGV[1]  the write-unlock message, "1"
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
--
-- Returns 1 when the lock was in write mode and was deleted (and "1" published), else 0.
if redis.call('hget', KEYS[1], 'mode') == 'write' then
    redis.call('del', KEYS[1])
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
