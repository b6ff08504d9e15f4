-- Set a count-down latch's count unless one is set (Redisson RCountDownLatch
-- trySetCount).
--
-- KEYS[1]  the latch: a string holding the count
-- KEYS[2]  the channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the new-count message, "1"
-- ARGV[2]  the count
-- ARGV[3]  publish command, PUBLISH or SPUBLISH
--
-- Returns 1 when the count was set (and "1" published), 0 when the latch existed.
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
redis.call('set', KEYS[1], ARGV[2])
redis.call(ARGV[3], KEYS[2], ARGV[1])
return 1
