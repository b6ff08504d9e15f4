-- Take a non-reentrant lock (Redisson RedissonNonReentrantLock, 4.4.0+, the acquire of
-- lock(), tryLock() and tryLock(wait, ...)).
--
-- KEYS[1]  the lock hash (same layout, channel and release as an RLock)
-- ARGV[1]  lease in milliseconds (PEXPIRE value)
-- ARGV[2]  owner field "<client-uuid>:<thread-number>"
--
-- Returns nil when the lock was free and the caller now holds it with a hold count of 1.
-- When the caller already holds it, nothing changes and the reply is an error whose code
-- is NON_REENTRANT_REACQUIRE, the marker Redisson's script answers with and its client
-- turns into IllegalMonitorStateException. Otherwise returns the PTTL of the key in
-- milliseconds, which is -1 when the key has no TTL.
local lock = KEYS[1]
local lease, owner = ARGV[1], ARGV[2]
-- Two words, so that Redis keeps the first as the error code (a lone word gets an
-- "ERR " prefix from Redis 7).
local reacquire = 'NON_REENTRANT_REACQUIRE the lock is already held by this owner'

if redis.call('exists', lock) == 0 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return nil
end
if redis.call('hexists', lock, owner) == 1 then
    return redis.error_reply(reacquire)
end
return redis.call('pttl', lock)
