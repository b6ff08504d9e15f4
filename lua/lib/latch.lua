-- The unlock latch of Redisson 3.24.1+, shared by every release script (prepended to
-- each at build time, see src/scripts.rs; the script itself follows this text).
--
-- A release request carries a latch key of its own (redisson_unlock_latch:{name}:<id>).
-- Its first run records the outcome there, "held nothing" included; a retry of the same
-- request, after a lost reply, reads the outcome back instead of releasing a second hold,
-- and so does a first run that arrives after its retry.

-- The outcome an earlier run of this request recorded: a number, or false for "the
-- caller held nothing" (a script returning false answers nil, as a run that found no
-- hold does); nil when no run recorded one. Callers test `~= nil`.
local function replayed(latch)
    local outcome = redis.call('get', latch)
    if outcome == 'none' then
        return false
    end
    if outcome then
        return tonumber(outcome)
    end
    return nil
end

-- Records that this request found no hold of the caller's, and answers nil. Without the
-- record, a first run that reaches Redis only after its retry found nothing (its reply
-- timed out, the retry went on another connection) would run as a fresh release and
-- take off a hold the same thread took since, under the same owner field.
local function not_held(latch, latch_ms)
    redis.call('set', latch, 'none', 'px', latch_ms)
    return nil
end

-- Records `outcome` for retries of this request (for `latch_ms` milliseconds) and
-- returns it. A release records its outcome before it publishes: if the publish is
-- refused (ACL), a retry still sees that the release itself happened.
local function settled(latch, latch_ms, outcome)
    redis.call('set', latch, outcome, 'px', latch_ms)
    return outcome
end

-- Takes one hold of `field` off `lock`. While holds remain the lock's TTL is set to
-- `lease` (Redisson re-applies the instance's lease) and the partial outcome 0 is
-- recorded. Returns the number of holds left.
local function release_one(lock, field, lease, latch, latch_ms)
    local left = redis.call('hincrby', lock, field, -1)
    if left > 0 then
        redis.call('pexpire', lock, lease)
        settled(latch, latch_ms, 0)
    end
    return left
end

-- Releases one hold of `field` on `lock`: nil when the field holds none; 0 when holds
-- remain (see release_one); 1, recorded, when that was the last hold, which the caller
-- then finishes (deletes or switches the lock, tells the waiters).
local function release_hold(lock, field, lease, latch, latch_ms)
    if redis.call('hexists', lock, field) == 0 then
        return not_held(latch, latch_ms)
    end
    if release_one(lock, field, lease, latch, latch_ms) > 0 then
        return 0
    end
    return settled(latch, latch_ms, 1)
end

-- release_hold, deleting the lock after its last hold (every kind but the write lock,
-- which may switch to read mode instead).
local function release_or_delete(lock, field, lease, latch, latch_ms)
    local released = release_hold(lock, field, lease, latch, latch_ms)
    if released == 1 then
        redis.call('del', lock)
    end
    return released
end
