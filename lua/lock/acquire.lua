-- Take or re-enter a reentrant lock (Redisson RLock acquire, 3.x-4.x; the same keys
-- change for RSpinLock, 3.15+). With ARGV[3] "0", take a non-reentrant lock instead
-- (Redisson RedissonNonReentrantLock, 4.4+, same layout, channel and release).
--
-- KEYS[1]  the lock hash
-- ARGV[1]  lease in milliseconds (PEXPIRE value)
-- ARGV[2]  owner field "<client-uuid>:<thread-number>"
-- ARGV[3]  "0" to refuse a re-entry; anything else (or nothing) re-enters
--
-- Returns nil when the caller holds the lock afterwards: its hold count went up by one
-- and the TTL was reset (not extended) to the lease. A refused re-entry changes nothing
-- (count and TTL stay) and answers an error whose code is NON_REENTRANT_REACQUIRE, the
-- marker Redisson's script uses and its client turns into IllegalMonitorStateException
-- (two words, so that Redis keeps the first as the code). Otherwise returns the PTTL of
-- the key in milliseconds, which is -1 when the key has no TTL.
local lock = KEYS[1]
local lease, owner, reentrant = ARGV[1], ARGV[2], ARGV[3] ~= '0'
local free = redis.call('exists', lock) == 0
if not free and redis.call('hexists', lock, owner) == 1 then
    if not reentrant then
        return redis.error_reply('NON_REENTRANT_REACQUIRE the lock is already held by this owner')
    end
    free = true
end
if free then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return nil
end
return redis.call('pttl', lock)
