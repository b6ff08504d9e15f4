-- Take or re-enter the read half of a read-write lock (Redisson RReadLock acquire).
--
-- KEYS[1]  the lock hash: field "mode" is "read" or "write"; field "<owner>" counts an
--          owner's read holds, field "<owner>:write" its write holds
-- KEYS[2]  the caller's timeout-key prefix, {name}:<owner>:rwlock_timeout; hold n has
--          the key KEYS[2]:n
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  read owner field "<client-uuid>:<thread-number>"
-- ARGV[3]  write owner field "<client-uuid>:<thread-number>:write"
--
-- A read is granted when nobody holds the lock, when it is in read mode, or when the
-- caller itself holds the write lock (a downgrade). Every read hold gets its own timeout
-- key with the hold's lease; the hash lives as long as the longest lease.
--
-- Returns nil when the caller holds one more read hold afterwards; otherwise the PTTL of
-- the hash in milliseconds (-1 when it has no TTL).
local lock, own_timeouts = KEYS[1], KEYS[2]
local lease, owner, write_owner = ARGV[1], ARGV[2], ARGV[3]
local mode = redis.call('hget', lock, 'mode')
if mode == false then
    redis.call('hset', lock, 'mode', 'read')
    redis.call('hset', lock, owner, 1)
    redis.call('set', own_timeouts .. ':1', 1, 'px', lease)
    redis.call('pexpire', lock, lease)
    return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', lock, write_owner) == 1) then
    local n = redis.call('hincrby', lock, owner, 1)
    redis.call('set', own_timeouts .. ':' .. n, 1, 'px', lease)
    local left = redis.call('pttl', lock)
    redis.call('pexpire', lock, math.max(left, tonumber(lease)))
    return nil
end
return redis.call('pttl', lock)
