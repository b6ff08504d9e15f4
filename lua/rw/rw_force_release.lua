-- Delete a read-write lock held in one mode, whoever holds it (Redisson RReadLock and
-- RWriteLock forceUnlock).
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- ARGV[1]  the unlock message of that half: "0" for read, "1" for write
-- ARGV[2]  publish command: PUBLISH, SPUBLISH, or both separated by a space
-- ARGV[3]  the mode this half deletes, "read" or "write"
--
-- Returns 1 when the lock was in that mode and was deleted (and the message published),
-- 2 when it is held in the other mode (and was left alone), 0 when there is no lock.
-- Redisson answers 0 for both of the last two. Read-hold timeout keys are left to expire.
local lock, channel = KEYS[1], KEYS[2]
local message, publish, mode = ARGV[1], ARGV[2], ARGV[3]
local current = redis.call('hget', lock, 'mode')
if current == mode then
    redis.call('del', lock)
    for command in string.gmatch(publish, '%S+') do redis.call(command, channel, message) end
    return 1
end
if current then
    return 2
end
return 0
