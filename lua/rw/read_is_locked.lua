-- Whether the read half of a read-write lock is held (Redisson RReadLock isLocked).
--
-- KEYS[1]  the lock hash
-- ARGV[]   none
--
-- Returns 1 when the lock is in read mode, or in write mode with more fields than
-- "mode" and one write owner (the writer also holds reads); else 0.
local lock = KEYS[1]
local mode = redis.call('hget', lock, 'mode')
if mode == 'read' then
    return 1
end
if mode == 'write' and redis.call('hlen', lock) > 2 then
    return 1
end
return 0
