-- Delete a key and, when it existed, tell its waiters (Redisson RLock forceUnlock with
-- the unlock message "0", RCountDownLatch delete with the new-count message "1").
--
-- KEYS[1]  the lock hash or the latch
-- KEYS[2]  its channel
-- ARGV[1]  the message
-- ARGV[2]  publish command: PUBLISH, SPUBLISH, or both separated by a space
--
-- Returns 1 when the key was deleted (and the message published), 0 when there was none.
local key, channel = KEYS[1], KEYS[2]
local message, publish = ARGV[1], ARGV[2]
if redis.call('del', key) == 1 then
    for command in string.gmatch(publish, '%S+') do redis.call(command, channel, message) end
    return 1
end
return 0
