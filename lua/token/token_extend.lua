-- Extend a string-token lock that holds the caller's token: set its TTL (redsync Extend,
-- redis-py reacquire and extend(replace_ttl=True)) or add to what is left of it (redis-py
-- extend).
--
-- KEYS[1]  the lock key
-- ARGV[1]  the caller's token
-- ARGV[2]  milliseconds: the new TTL ('set') or the time to add ('add')
-- ARGV[3]  'set' or 'add'
--
-- Returns the key's new TTL in milliseconds (at least 1) when it held the token. Returns
-- 0 when the key is gone or holds another token, and -1 when asked to add to a key that
-- has no TTL (redis-py refuses that too): in both cases nothing changes.
local key = KEYS[1]
local token, ms, mode = ARGV[1], tonumber(ARGV[2]), ARGV[3]

if redis.call('get', key) ~= token then
    return 0
end
local ttl = ms
if mode == 'add' then
    local left = redis.call('pttl', key)
    if left < 0 then
        return -1
    end
    ttl = left + ms
end
redis.call('pexpire', key, ttl)
return ttl
