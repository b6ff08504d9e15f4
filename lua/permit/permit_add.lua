-- Add permits to (or take them from) a permit-expirable semaphore, refusing counts that
-- Java's int cannot hold (Redisson RPermitExpirableSemaphore addPermits, plus a range
-- check Redisson lacks).
--
-- KEYS[1]  the semaphore (available permits)
-- KEYS[2]  the channel, redisson_sc:{name}
-- KEYS[3]  the acquired permits, {name}:timeout
-- ARGV[1]  permits to add p, may be negative
-- ARGV[2]  publish command: PUBLISH, SPUBLISH, or both separated by a space
--
-- A missing semaphore counts as 0; the count is written with SET, as Redisson does.
-- Refused with the error PERMITS_OUT_OF_RANGE, changing nothing, when the new available
-- count or the new total (available plus acquired, what getPermits() returns, and the
-- most that releases can bring the available count to) would leave
-- -2147483648..2147483647. Publishes p itself (not the new count), and only when p is
-- positive, as Redisson does: a listener must read such a message as "something was
-- added", not as the number now free.
--
-- Returns the available count afterwards.
local semaphore, channel, acquired_set = KEYS[1], KEYS[2], KEYS[3]
local permits, publish = tonumber(ARGV[1]), ARGV[2]
local int_min, int_max = -2147483648, 2147483647

local available = tonumber(redis.call('get', semaphore) or 0) + permits
local total = available + redis.call('zcard', acquired_set)
if available < int_min or total > int_max then
    return redis.error_reply('PERMITS_OUT_OF_RANGE the count would leave the Java int range')
end
redis.call('set', semaphore, available)
if permits > 0 then
    for command in string.gmatch(publish, '%S+') do redis.call(command, channel, ARGV[1]) end
end
return available
