-- Count a count-down latch down by one (Redisson RCountDownLatch countDown).
--
-- KEYS[1]  the latch
-- KEYS[2]  the channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the zero-count message, "0" (opens every waiter)
-- ARGV[2]  publish command: PUBLISH, SPUBLISH, or both separated by a space
--
-- The key is deleted once the count is at or below 0; "0" is published only by the
-- count-down that reaches exactly 0.
--
-- Returns the count after the decrement (-1 for a latch that did not exist).
local latch, channel = KEYS[1], KEYS[2]
local message, publish = ARGV[1], ARGV[2]
local left = redis.call('decr', latch)
if left <= 0 then
    redis.call('del', latch)
end
if left == 0 then
    for command in string.gmatch(publish, '%S+') do redis.call(command, channel, message) end
end
return left
