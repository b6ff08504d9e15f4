-- Count a count-down latch down by one (Redisson RCountDownLatch countDown).
--
-- KEYS[1]  the latch
-- KEYS[2]  the channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the zero-count message, "0" (opens every waiter)
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
--
-- The key is deleted once the count is at or below 0; "0" is published only by the
-- count-down that reaches exactly 0.
--
-- Returns the count after the decrement (-1 for a latch that did not exist).
local left = redis.call('decr', KEYS[1])
if left <= 0 then
    redis.call('del', KEYS[1])
end
if left == 0 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
return left
