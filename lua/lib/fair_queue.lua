-- The fair lock's queue rules, shared by its scripts (prepended to each at build time,
-- see src/scripts.rs; the script itself follows this text).
--
-- queue: redisson_lock_queue:{name}, a list of waiting owner fields, first in line at
-- the head; timeouts: redisson_lock_timeout:{name}, a sorted set of the same fields
-- scored by the epoch millisecond at which each one's slot ends.

-- Drops waiters at the head whose slot ended before `now` without them taking the lock
-- (crashed or gone). Only the head is looked at; later slots are left alone, as in
-- Redisson.
local function purge_stale_heads(queue, timeouts, now)
    while true do
        local head = redis.call('lindex', queue, 0)
        if not head then
            return
        end
        local ends = redis.call('zscore', timeouts, head)
        if ends and tonumber(ends) <= now then
            redis.call('zrem', timeouts, head)
            redis.call('lpop', queue)
        else
            return
        end
    end
end

-- Grants the lock to `owner` when it is free and nobody waits or `owner` is first in
-- line; every waiter left then moves one slot (`wait` ms) closer to the front. Re-enters
-- when `owner` holds the lock already. Either way the TTL becomes `lease`. Returns true
-- when `owner` holds the lock afterwards.
local function take_in_turn(lock, queue, timeouts, owner, lease, wait)
    if redis.call('exists', lock) == 0 then
        local head = redis.call('lindex', queue, 0)
        if not head or head == owner then
            redis.call('lpop', queue)
            redis.call('zrem', timeouts, owner)
            local waiting = redis.call('zrange', timeouts, 0, -1)
            for i = 1, #waiting do
                redis.call('zincrby', timeouts, -wait, waiting[i])
            end
            redis.call('hset', lock, owner, 1)
            redis.call('pexpire', lock, lease)
            return true
        end
    end
    if redis.call('hexists', lock, owner) == 1 then
        redis.call('hincrby', lock, owner, 1)
        redis.call('pexpire', lock, lease)
        return true
    end
    return false
end

-- Tells the waiter first in line, if any, on its own channel (`channel` .. ':' .. its
-- owner field) that the lock is free.
local function tell_head(queue, channel, message, publish)
    local head = redis.call('lindex', queue, 0)
    if head then
        for command in string.gmatch(publish, '%S+') do redis.call(command, channel .. ':' .. head, message) end
    end
end
