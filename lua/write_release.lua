-- Release one write hold of a read-write lock (Redisson RWriteLock unlock, with the
-- unlock latch of 3.24.1+).
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- KEYS[3]  the latch key, redisson_unlock_latch:{name}:<request-id>
-- ARGV[1]  the write-unlock message, "1" (wakes every waiter)
-- ARGV[2]  lease in milliseconds re-applied after a partial release
-- ARGV[3]  write owner field "<client-uuid>:<thread-number>:write"
-- ARGV[4]  publish command, PUBLISH or SPUBLISH
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
local replay = redis.call('get', KEYS[3])
if replay then
    return tonumber(replay)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('set', KEYS[3], 1, 'px', ARGV[5])
    redis.call(ARGV[4], KEYS[2], ARGV[1])
    return nil
end
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[5])
    return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
-- Latch before publish: a refused publish (ACL) must not hide that the release happened.
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[4], KEYS[2], ARGV[1])
else
    redis.call('hset', KEYS[1], 'mode', 'read')
end
return 1
