-- Take a plain string-token lock: the SET NX PX recipe that go-redsync and redis-py use,
-- plus, for a refused caller, how long the holder's key still lives.
--
-- KEYS[1]  the lock key, a string holding its holder's token
-- ARGV[1]  the caller's token
-- ARGV[2]  the TTL in milliseconds
--
-- Returns nil when the caller holds the lock afterwards: the key was absent, or already
-- held ARGV[1] (this same request, sent again after its reply was lost: tokens are never
-- reused), and now holds ARGV[1] with a TTL of ARGV[2]. Otherwise returns the key's PTTL
-- in milliseconds, which
-- is -1 when the holder set none (redis-py without a timeout). A key of another type is
-- an error starting with WRONGTYPE: SET NX alone would just fail on it, and a waiter
-- would wait for a "lock" that is no lock at all.
local key = KEYS[1]
local token, ttl = ARGV[1], ARGV[2]

if redis.call('set', key, token, 'NX', 'PX', ttl) then
    return nil
end
local kind = redis.call('type', key)['ok']
if kind ~= 'string' then
    return redis.error_reply('WRONGTYPE the lock key holds a ' .. kind .. ', not a string token')
end
if redis.call('get', key) == token then
    -- The TTL from now, so the caller's lease, counted from its latest send, is not
    -- longer than the key's.
    redis.call('pexpire', key, ttl)
    return nil
end
return redis.call('pttl', key)
