-- Set or clear the expiry of every key of one object at once (Redisson RExpirable
-- expire / expireAt / expireIfSet / expireIfNotSet / expireIfGreater / expireIfLess /
-- clearExpire on objects made of several keys: a fair lock with its queue and timeouts,
-- a fenced lock with its token counter, a permit-expirable semaphore with its timeouts).
--
-- KEYS[1..n]  every key of the object, all in one slot
-- ARGV[1]  what to do: 'pexpire', 'pexpireat' or 'persist'
-- ARGV[2]  milliseconds to live (pexpire) or the epoch milliseconds to expire at
--          (pexpireat); ignored by persist
-- ARGV[3]  '' or a condition for pexpire/pexpireat: NX, XX, GT or LT (Redis 7.0+);
--          ignored by persist
--
-- Keys that do not exist are skipped by Redis itself. Redisson applies one call per key
-- the same way and never touches the object's waiters or channels.
--
-- Returns 1 when the expiry of at least one key was set (or, for persist, removed), 0
-- when no key changed. An unknown ARGV[1] is refused with an error and changes nothing.
local action, when, condition = ARGV[1], ARGV[2], ARGV[3]

if action ~= 'pexpire' and action ~= 'pexpireat' and action ~= 'persist' then
    return redis.error_reply('EXPIRE_BAD_ACTION ' .. tostring(action))
end
local changed = 0
for i = 1, #KEYS do
    local done
    if action == 'persist' then
        done = redis.call('persist', KEYS[i])
    elseif condition ~= nil and condition ~= '' then
        done = redis.call(action, KEYS[i], when, condition)
    else
        done = redis.call(action, KEYS[i], when)
    end
    if done == 1 then
        changed = 1
    end
end
return changed
