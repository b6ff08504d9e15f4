-- Run the caller's writes only while it still holds its lock and, for a fenced lock,
-- only while its token is the newest (redmutex's fenced write; Redisson has no
-- counterpart, and the lock keys are only read here).
--
-- KEYS[1]     the lock hash
-- KEYS[2]     the token counter, redisson_lock_token:{name}; read only when ARGV[2] is
--             not empty (a plain lock passes the same name, which is in the lock's slot)
-- KEYS[3..]   the keys the commands use, in command order, all in the lock's slot
-- ARGV[1]     the owner field that must be in the hash: "<client-uuid>:<thread-number>"
--             ("...:write" for a write lock)
-- ARGV[2]     the caller's fencing token in decimal, or '' to skip the token check
-- ARGV[3]     the number of commands n
-- ARGV[4..]   n commands, one after the other, each as: name, k (its key count),
--             a (its other argument count), then its a arguments. Its k keys are the
--             next unused entries of KEYS and come before the other arguments, as in
--             SET, HSET, INCRBY, DEL, EXPIRE, LPUSH, ZADD (commands whose keys are
--             interleaved with values, like MSET, must be split).
--
-- Checks, in this order, before anything is written; a failed check writes nothing and
-- answers an error whose code says which:
--   FENCED_BAD_PROGRAM   ARGV/KEYS do not describe exactly n commands, or a command
--                        names the lock hash or the token counter as one of its keys;
--   FENCED_NOT_HELD      the hash has no such owner field (the lease ran out, or someone
--                        else holds the lock now);
--   FENCED_STALE_TOKEN   the counter is not ARGV[2] (a later acquisition drew a newer
--                        token); the message carries the counter's value (0 if unset).
-- The commands then run in order. A command that fails stops the run with the error
-- FENCED_PARTIAL <i> <its error>: commands 1..i-1 have been applied (scripts do not roll
-- back), later ones have not run.
--
-- Returns an array with each command's reply, in order.
local lock, counter = KEYS[1], KEYS[2]
local owner, token = ARGV[1], ARGV[2]
local count = tonumber(ARGV[3])

-- Parse the whole program before touching anything.
local program = {}
local next_arg, next_key = 4, 3
local function bad(why)
    return redis.error_reply('FENCED_BAD_PROGRAM ' .. why)
end
if not count or count < 0 or count % 1 ~= 0 then
    return bad('ARGV[3] is not a command count')
end
for i = 1, count do
    local name = ARGV[next_arg]
    local nkeys, nargs = tonumber(ARGV[next_arg + 1]), tonumber(ARGV[next_arg + 2])
    if not name or not nkeys or not nargs or nkeys < 0 or nargs < 0
        or nkeys % 1 ~= 0 or nargs % 1 ~= 0 then
        return bad('command ' .. i .. ' is not name, key count, argument count')
    end
    local call = {name}
    for _ = 1, nkeys do
        local key = KEYS[next_key]
        if not key then
            return bad('command ' .. i .. ' wants more KEYS than were given')
        end
        if key == lock or key == counter then
            return bad('command ' .. i .. ' writes the lock itself')
        end
        call[#call + 1] = key
        next_key = next_key + 1
    end
    next_arg = next_arg + 3
    for _ = 1, nargs do
        if next_arg > #ARGV then
            return bad('command ' .. i .. ' wants more ARGV than were given')
        end
        call[#call + 1] = ARGV[next_arg]
        next_arg = next_arg + 1
    end
    program[i] = call
end
if next_arg ~= #ARGV + 1 or next_key ~= #KEYS + 1 then
    return bad('unused KEYS or ARGV after the last command')
end

if redis.call('hexists', lock, owner) == 0 then
    return redis.error_reply('FENCED_NOT_HELD the lock is not held by this owner')
end
if token ~= '' then
    local newest = redis.call('get', counter) or '0'
    if newest ~= token then
        return redis.error_reply('FENCED_STALE_TOKEN ' .. newest)
    end
end

local replies = {}
for i = 1, count do
    local reply = redis.pcall(unpack(program[i]))
    if type(reply) == 'table' and reply.err then
        return redis.error_reply('FENCED_PARTIAL ' .. i .. ' ' .. reply.err)
    end
    replies[i] = reply
end
return replies
