-- Delete a count-down latch (Redisson RCountDownLatch delete).
--
-- KEYS[1]  the latch
-- KEYS[2]  the channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the new-count message, "1"
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
--
-- Returns 1 when a latch was deleted (and "1" published), 0 when there was none.
local latch, channel = KEYS[1], KEYS[2]
local message, publish = ARGV[1], ARGV[2]
if redis.call('del', latch) == 1 then
    redis.call(publish, channel, message)
    return 1
end
return 0
