-- Delete a count-down latch (Redisson RCountDownLatch delete).
--
-- KEYS[1]  the latch
-- KEYS[2]  the channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the new-count message, "1"
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
--
-- Returns 1 when a latch was deleted (and "1" published), 0 when there was none.
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
