-- Take or queue for a non-reentrant fair lock (Redisson RedissonNonReentrantFairLock,
-- 4.4.0+, the waiting acquire of lock() and tryLock(wait, ...)).
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the waiter queue, redisson_lock_queue:{name}: a list of owner fields
-- KEYS[3]  the waiter timeouts, redisson_lock_timeout:{name}: a sorted set of owner
--          fields scored by the epoch ms at which their slot ends
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-uuid>:<thread-number>"
-- ARGV[3]  the waiter's slot length in milliseconds (its wait time, else 5 minutes)
-- ARGV[4]  now, epoch milliseconds of the caller's clock
--
-- The same keys, steps and replies as fair_acquire.lua, with one difference: when the
-- caller already holds the lock nothing changes (it is not queued either) and the reply
-- is an error whose code is NON_REENTRANT_REACQUIRE, as from Redisson's script.
--
-- Returns nil when the caller holds the lock afterwards (its hold count is 1). Otherwise
-- the caller is queued (appended if it was not) and the reply is how many milliseconds
-- it may sleep before it must retry, unless its own channel wakes it first:
--   while the lock is held: the earlier of the lock's PTTL and, when another waiter is
--      at the head, the time left in that waiter's slot; -1 when neither bound exists;
--   0 while the lock is free but another waiter is at the head.
local lock, queue, timeouts = KEYS[1], KEYS[2], KEYS[3]
local lease, owner = ARGV[1], ARGV[2]
local wait = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
-- Two words, so that Redis keeps the first as the error code.
local reacquire = 'NON_REENTRANT_REACQUIRE the lock is already held by this owner'

-- Purge stale heads: waiters whose slot ended without them taking the lock. Only the
-- head is looked at; later slots are left alone.
while true do
    local head = redis.call('lindex', queue, 0)
    if not head then
        break
    end
    local ends = redis.call('zscore', timeouts, head)
    if ends and tonumber(ends) <= now then
        redis.call('zrem', timeouts, head)
        redis.call('lpop', queue)
    else
        break
    end
end

if redis.call('exists', lock) == 0 then
    local head = redis.call('lindex', queue, 0)
    if not head or head == owner then
        redis.call('lpop', queue)
        redis.call('zrem', timeouts, owner)
        -- Every waiter left is one slot closer to the front.
        local waiting = redis.call('zrange', timeouts, 0, -1)
        for i = 1, #waiting do
            redis.call('zincrby', timeouts, -wait, waiting[i])
        end
        redis.call('hset', lock, owner, 1)
        redis.call('pexpire', lock, lease)
        return nil
    end
end

if redis.call('hexists', lock, owner) == 1 then
    return redis.error_reply(reacquire)
end

if not redis.call('zscore', timeouts, owner) then
    -- The new slot starts when the last waiter's ends (or when the lease ends).
    local last = redis.call('lindex', queue, -1)
    local last_ends = false
    if last and last ~= owner then
        last_ends = redis.call('zscore', timeouts, last)
    end
    local ttl
    if last_ends then
        ttl = tonumber(last_ends) - now
    else
        ttl = redis.call('pttl', lock)
    end
    if redis.call('zadd', timeouts, ttl + wait + now, owner) == 1 then
        redis.call('rpush', queue, owner)
    end
end

local pttl = redis.call('pttl', lock)
if pttl == -2 then
    return 0
end
local head_left = false
local head = redis.call('lindex', queue, 0)
if head and head ~= owner then
    local ends = redis.call('zscore', timeouts, head)
    if ends then
        head_left = math.max(1, tonumber(ends) - now)
    end
end
if pttl == -1 then
    return head_left or -1
end
if head_left and head_left < pttl then
    return head_left
end
return pttl
