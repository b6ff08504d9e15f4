-- Take or re-enter a fenced lock and draw a fencing token (Redisson RFencedLock,
-- 3.19.0+: lockAndGetToken / tryLockAndGetToken, and also its plain lock() / tryLock(),
-- which move the token the same way).
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the token counter, redisson_lock_token:{name}
-- ARGV[1]  lease in milliseconds (PEXPIRE value)
-- ARGV[2]  owner field "<client-uuid>:<thread-number>"
--
-- The keys change exactly as with Redisson's scripts: on a grant the counter goes up by
-- one (on re-entry too), the hold count goes up by one and the TTL is reset to the lease.
-- The counter is incremented first, so a counter that is not an integer fails the call
-- before the hash is touched. The counter never gets a TTL here.
--
-- Returns {1, token} when the caller holds the lock afterwards, token being the
-- counter's new value; otherwise {0, pttl}, the lock's PTTL in milliseconds (-1 when the
-- key has no TTL). Redisson answers {-1, token} or {pttl, -1}, so a Java client takes a
-- foreign hold without TTL for its own grant; the flag keeps the two apart.
local lock, counter = KEYS[1], KEYS[2]
local lease, owner = ARGV[1], ARGV[2]

if redis.call('exists', lock) == 0 or redis.call('hexists', lock, owner) == 1 then
    local token = redis.call('incr', counter)
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return {1, token}
end
return {0, redis.call('pttl', lock)}
