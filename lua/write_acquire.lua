-- Take or re-enter the write half of a read-write lock (Redisson RWriteLock acquire).
--
-- KEYS[1]  the lock hash
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  write owner field "<client-uuid>:<thread-number>:write"
--
-- Granted when nobody holds the lock, or as a re-entry when the caller already holds the
-- write lock. Re-entry adds the lease to the remaining TTL (Redisson's write lock is
-- additive, unlike RLock). Any read hold blocks it, the caller's own included: a reader
-- cannot upgrade.
--
-- Returns nil when the caller holds one more write hold afterwards; otherwise the PTTL of
-- the hash in milliseconds (-1 when it has no TTL).
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local left = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], left + tonumber(ARGV[1]))
    return nil
end
return redis.call('pttl', KEYS[1])
