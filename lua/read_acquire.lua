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
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1])
    local left = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(left, tonumber(ARGV[1])))
    return nil
end
return redis.call('pttl', KEYS[1])
