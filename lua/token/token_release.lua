-- Release a string-token lock if it still holds the caller's token (the compare-and-delete
-- of go-redsync and redis-py), and wake one redmutex waiter on the lock's own channel.
--
-- KEYS[1]  the lock key
-- KEYS[2]  redmutex's wake-up channel for that key
-- ARGV[1]  the caller's token
-- ARGV[2]  publish command: PUBLISH, SPUBLISH, or both separated by a space
-- ARGV[3]  the wake-up message, "0"
--
-- Returns 1 when the key held the token and was deleted (and the message published); 0
-- when it holds another token, and -1 when it is gone (redsync's code for an expired
-- lock): in both cases nothing changes. A key of another type is a WRONGTYPE error.
local key, channel = KEYS[1], KEYS[2]
local token, publish, message = ARGV[1], ARGV[2], ARGV[3]

local held = redis.call('get', key)
if not held then
    return -1
end
if held ~= token then
    return 0
end
redis.call('del', key)
for command in string.gmatch(publish, '%S+') do redis.call(command, channel, message) end
return 1
