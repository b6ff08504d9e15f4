-- Release one write hold of a read-write lock (Redisson RWriteLock unlock, with the
-- unlock latch of 3.24.1+). Runs after lib/latch.lua and lib/rwlock.lua.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- KEYS[3]  the latch key, redisson_unlock_latch:{name}:<request-id>
-- ARGV[1]  the write-unlock message, "1" (wakes every waiter)
-- ARGV[2]  lease in milliseconds re-applied after a partial release
-- ARGV[3]  write owner field "<client-uuid>:<thread-number>:write"
-- ARGV[4]  publish command: PUBLISH, SPUBLISH, or both separated by a space
-- ARGV[5]  latch lifetime in milliseconds
--
-- On the last write hold: with no other field left the hash is deleted and "1"
-- published; when the caller still holds reads (it downgraded) the lock switches to read
-- mode and nothing is published, as in Redisson.
--
-- Returns nil when the caller holds no write hold (also when there is no lock at all;
-- Redisson then publishes "1" anyway, and so does this script); 0 when write holds
-- remain; 1 after the last write hold. A retry of the same request returns the first
-- outcome.
local lock, channel, latch = KEYS[1], KEYS[2], KEYS[3]
local message, lease, owner, publish, latch_ms = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local decided, mode = begin_release(lock, channel, latch, latch_ms, message, publish)
if decided then
    return mode
end
if mode ~= 'write' then
    return not_held(latch, latch_ms)
end
local released = release_hold(lock, owner, lease, latch, latch_ms)
if released ~= 1 then
    return released
end
redis.call('hdel', lock, owner)
if redis.call('hlen', lock) == 1 then
    redis.call('del', lock)
    for command in string.gmatch(publish, '%S+') do redis.call(command, channel, message) end
else
    redis.call('hset', lock, 'mode', 'read')
end
return 1
