-- Write a hold's TTL again, unchanged, so that the connection this runs on has a
-- replicated write of its own: a WAIT sent next on it then covers every write the
-- master made before, among them an acquire whose reply was lost with its connection.
-- (Since Redis 7.2 a connection's WAIT counts only from its own propagated writes; a
-- read would leave it nothing to wait for.)
--
-- KEYS[1]  a lock hash
-- ARGV[1]  the owner field the caller holds it with
--
-- Returns 1 when the owner holds KEYS[1] and its TTL was written again, 0 when it does
-- not hold it or the key has no TTL to write (nothing is written then).
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return 0
end
-- Time stands still inside a script, so the expiry set here is the one read here.
local ttl = redis.call('pttl', KEYS[1])
if ttl <= 0 then
    return 0
end
redis.call('pexpire', KEYS[1], ttl)
return 1
