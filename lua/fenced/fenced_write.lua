-- Run the caller's writes only while it still holds its lock and, for a fenced lock,
-- only while its token is the newest (redmutex's fenced write; Redisson has no
-- counterpart, and the lock keys are only read here).
--
-- KEYS[1]     the lock hash
-- KEYS[2]     the token counter, redisson_lock_token:{name}; read only when ARGV[2] is
--             not empty (a plain lock passes the lock's name again)
-- KEYS[3..]   every key the commands use, all in the lock's slot: declared so that
--             Redis Cluster routes and checks them, and checked here against KEYS[1]
--             and KEYS[2]
-- ARGV[1]     the owner field that must be in the hash: "<client-uuid>:<thread-number>"
--             ("...:write" for a write lock)
-- ARGV[2]     the caller's fencing token in decimal, or '' to skip the token check
-- ARGV[3]     the number of commands n
-- ARGV[4..]   n commands, one after the other, each as its word count w followed by
--             its w words (the command name, then its keys and arguments in the
--             command's own order)
--
-- Checks, in this order, before anything is written; a failed check writes nothing and
-- answers an error whose code says which:
--   FENCED_BAD_PROGRAM   ARGV does not hold exactly n commands, or KEYS[3..] names the
--                        lock hash or the token counter;
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
local owner, token, count = ARGV[1], ARGV[2], tonumber(ARGV[3])

-- Where each command's words end; the words are run straight from ARGV.
local last, at = {}, 4
for i = 1, count or -1 do
    local words = tonumber(ARGV[at])
    if not words or words < 1 then
        return redis.error_reply('FENCED_BAD_PROGRAM command ' .. i .. ' has no word count')
    end
    at = at + words + 1
    last[i] = at - 1
end
if not count or at ~= #ARGV + 1 then
    return redis.error_reply('FENCED_BAD_PROGRAM ARGV does not hold ARGV[3] commands')
end
for i = 3, #KEYS do
    if KEYS[i] == lock or KEYS[i] == counter then
        return redis.error_reply('FENCED_BAD_PROGRAM a command writes the lock itself')
    end
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

local replies, first = {}, 5
for i = 1, count do
    local reply = redis.pcall(unpack(ARGV, first, last[i]))
    if type(reply) == 'table' and reply.err then
        return redis.error_reply('FENCED_PARTIAL ' .. i .. ' ' .. reply.err)
    end
    replies[i] = reply
    first = last[i] + 2
end
return replies
