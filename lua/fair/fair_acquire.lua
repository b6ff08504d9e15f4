-- Take, re-enter or queue for a fair lock (Redisson RFairLock: the waiting acquire of
-- lock() and tryLock(wait, ...), and with ARGV[5] "0" the single attempt of tryLock()).
-- With ARGV[6] "0" the lock is non-reentrant (Redisson RedissonNonReentrantFairLock,
-- 4.4+: same keys, queue and release). Runs after lib/fair_queue.lua.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the waiter queue, redisson_lock_queue:{name}: a list of owner fields
-- KEYS[3]  the waiter timeouts, redisson_lock_timeout:{name}: a sorted set of owner
--          fields scored by the epoch ms at which their slot ends
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-uuid>:<thread-number>"
-- ARGV[3]  the waiter's slot length in milliseconds (its wait time, else 5 minutes)
-- ARGV[4]  now, epoch milliseconds of the caller's clock
-- ARGV[5]  "1" to queue when the lock is not granted; "0" for a single attempt that
--          never queues (tryLock(): the slot length is then what a grant takes off the
--          slots of the waiters behind)
-- ARGV[6]  "0" to refuse a re-entry; anything else (or nothing) re-enters
--
-- A refused re-entry changes nothing but the stale-head purge (the caller is not queued)
-- and answers an error whose code is NON_REENTRANT_REACQUIRE, as Redisson's script does.
-- The check may come before the grant: a caller that holds the lock finds it taken, so
-- the grant could only have re-entered.
--
-- Returns nil when the caller holds the lock afterwards. A single attempt that fails
-- returns 1 and changes nothing but the stale-head purge. Otherwise the caller is queued
-- (appended if it was not) and the reply is how many milliseconds it may sleep before it
-- must retry, unless its own channel wakes it first:
--   while the lock is held: the earlier of the lock's PTTL (the lease may run out) and,
--      when another waiter is at the head, the time left in that waiter's slot (a
--      crashed head is purged then; the unlock message went to it, not to the caller);
--      -1 when neither bound exists (no TTL, caller at the head): only the message helps;
--   0 while the lock is free but another waiter is at the head (it is about to take the
--      lock, or its slot is about to be purged).
-- The keys change exactly as with Redisson's script; only this reply differs (Redisson
-- answers max(0, PTTL) to queued callers and its enqueue estimate to new ones, and
-- spins while the lock is free).
local lock, queue, timeouts = KEYS[1], KEYS[2], KEYS[3]
local lease, owner, wait, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])

purge_stale_heads(queue, timeouts, now)
if ARGV[6] == '0' and redis.call('hexists', lock, owner) == 1 then
    return redis.error_reply('NON_REENTRANT_REACQUIRE the lock is already held by this owner')
end
if take_in_turn(lock, queue, timeouts, owner, lease, wait) then
    return nil
end
if ARGV[5] == '0' then
    return 1
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
