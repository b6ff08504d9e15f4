-- Try every data command a lock script runs, on scratch keys, and name those the user
-- may not run (`redmutex doctor` when ACL DRYRUN is not allowed). Leaves nothing behind.
--
-- KEYS[1]  a scratch hash     {name}:doctor-probe:h
-- KEYS[2]  a scratch string   {name}:doctor-probe:s
-- KEYS[3]  a scratch list     {name}:doctor-probe:l
-- KEYS[4]  a scratch zset     {name}:doctor-probe:z
--
-- Returns the names of the refused commands (empty when every one ran).
local h, s, l, z = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local refused = {}
local function try(name, ...)
    local reply = redis.pcall(name, ...)
    if type(reply) == 'table' and reply.err then
        local e = reply.err
        if string.find(e, 'NOPERM') or string.find(e, "can't") or string.find(e, 'permission') then
            refused[#refused + 1] = name
        end
    end
end
try('hset', h, 'f', '1')
try('hincrby', h, 'f', '1')
try('hexists', h, 'f')
try('hget', h, 'f')
try('hlen', h)
try('hkeys', h)
try('hdel', h, 'f')
try('set', s, '1')
try('get', s)
try('incrby', s, '1')
try('decrby', s, '1')
try('decr', s)
try('pexpire', s, '1000')
try('pttl', s)
try('exists', s)
try('rpush', l, 'a')
try('lindex', l, '0')
try('lrange', l, '0', '-1')
try('lrem', l, '0', 'a')
try('lpop', l)
try('zadd', z, '1', 'm')
try('zincrby', z, '1', 'm')
try('zscore', z, 'm')
try('zrange', z, '0', '-1')
try('zrangebyscore', z, '0', '1')
try('zcount', z, '0', '1')
try('zcard', z)
try('zrem', z, 'm')
try('zremrangebyscore', z, '0', '1')
try('del', h, s, l, z)
redis.pcall('del', h, s, l, z)
return refused
