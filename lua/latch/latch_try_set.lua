-- Set a count-down latch's count unless one is set (Redisson RCountDownLatch
-- trySetCount).
--
-- KEYS[1]  the latch: a string holding the count
-- KEYS[2]  the channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the new-count message, "1"
-- ARGV[2]  the count
-- ARGV[3]  publish command: PUBLISH, SPUBLISH, or both separated by a space
--
-- Returns 1 when the count was set (and "1" published), 0 when the latch existed.
local latch, channel = KEYS[1], KEYS[2]
local message, count, publish = ARGV[1], ARGV[2], ARGV[3]
if redis.call('exists', latch) == 1 then
    return 0
end
redis.call('set', latch, count)
for command in string.gmatch(publish, '%S+') do redis.call(command, channel, message) end
return 1
