-- Release one read hold of a read-write lock (Redisson RReadLock unlock, with the unlock
-- latch of 3.24.1+). Runs after lib/latch.lua and lib/rwlock.lua.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- KEYS[3]  the caller's timeout-key prefix, {name}:<owner>:rwlock_timeout
-- KEYS[4]  the lock's key prefix, {name} (the bare name when it has braces): other
--          owners' timeout keys are KEYS[4]:<field>:rwlock_timeout:<n>
-- KEYS[5]  the latch key, redisson_unlock_latch:{name}:<request-id>
-- ARGV[1]  the read-unlock message, "0"
-- ARGV[2]  read owner field "<client-uuid>:<thread-number>"
-- ARGV[3]  publish command: PUBLISH, SPUBLISH, or both separated by a space
-- ARGV[4]  latch lifetime in milliseconds
--
-- After the hold's own timeout key is deleted, the hash's TTL shrinks to the longest
-- remaining read-hold timeout of any owner: owners whose timeout keys expired (dead
-- clients) no longer count. With none left the hash is deleted and "0" published, unless
-- the lock is in write mode (the caller's read was a downgrade; the write hold keeps it).
--
-- Returns nil when the caller holds no read hold (also when there is no lock at all;
-- Redisson then publishes "0" anyway, and so does this script); 0 when the lock is still
-- held; 1 when it was deleted. A retry of the same request returns the first outcome.
local lock, channel, own_timeouts, key_prefix, latch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local message, owner, publish, latch_ms = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local decided, mode = begin_release(lock, channel, latch, latch_ms, message, publish)
if decided then
    return mode
end
if redis.call('hexists', lock, owner) == 0 then
    return not_held(latch, latch_ms)
end
local left = redis.call('hincrby', lock, owner, -1)
if left == 0 then
    redis.call('hdel', lock, owner)
end
redis.call('del', own_timeouts .. ':' .. (left + 1))
if redis.call('hlen', lock) > 1 then
    local longest = -3
    local fields = redis.call('hkeys', lock)
    for _, field in ipairs(fields) do
        local holds = tonumber(redis.call('hget', lock, field))
        if holds then
            for i = holds, 1, -1 do
                local ttl = redis.call('pttl', key_prefix .. ':' .. field .. ':rwlock_timeout:' .. i)
                longest = math.max(longest, ttl)
            end
        end
    end
    if longest > 0 then
        redis.call('pexpire', lock, longest)
        return settled(latch, latch_ms, 0)
    end
    if mode == 'write' then
        return settled(latch, latch_ms, 0)
    end
end
redis.call('del', lock)
settled(latch, latch_ms, 1)
for command in string.gmatch(publish, '%S+') do redis.call(command, channel, message) end
return 1
