-- Take or re-enter a reentrant lock (Redisson RLock acquire, 3.x-4.x).
--
-- KEYS[1]  the lock hash
-- ARGV[1]  lease in milliseconds (PEXPIRE value)
-- ARGV[2]  owner field "<client-uuid>:<thread-number>"
--
-- Returns nil when the caller holds the lock afterwards: its hold count went up by one
-- and the TTL was reset (not extended) to the lease. Otherwise returns the PTTL of the
-- key in milliseconds, which is -1 when the key has no TTL.
local lock = KEYS[1]
local lease, owner = ARGV[1], ARGV[2]
if redis.call('exists', lock) == 0 or redis.call('hexists', lock, owner) == 1 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return nil
end
return redis.call('pttl', lock)
