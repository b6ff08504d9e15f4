-- Whether the read half of a read-write lock is held (Redisson RReadLock isLocked).
--
-- KEYS[1]  the lock hash
-- ARGV[]   none
--
-- Returns 1 when the lock is in read mode, or in write mode with more fields than
-- "mode" and one write owner (the writer also holds reads); else 0.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'read' then
    return 1
end
if mode == 'write' and redis.call('hlen', KEYS[1]) > 2 then
    return 1
end
return 0
