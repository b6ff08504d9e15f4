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
local lock = KEYS[1]
local lease, owner = ARGV[1], ARGV[2]
local mode = redis.call('hget', lock, 'mode')
if mode == false then
    redis.call('hset', lock, 'mode', 'write')
    redis.call('hset', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return nil
end
if mode == 'write' and redis.call('hexists', lock, owner) == 1 then
    redis.call('hincrby', lock, owner, 1)
    local left = redis.call('pttl', lock)
    redis.call('pexpire', lock, left + tonumber(lease))
    return nil
end
return redis.call('pttl', lock)
