-- Release every hold of one owner of a lock, fenced lock or fair lock, whoever runs it
-- (`redmutex unlock NAME --owner ID:THREAD`). Runs after lib/fair_queue.lua.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  its channel, redisson_lock__channel:{name}
-- KEYS[3]  the fair lock's waiter queue, redisson_lock_queue:{name}
-- KEYS[4]  the fair lock's waiter timeouts, redisson_lock_timeout:{name}
-- ARGV[1]  the owner field "<client-id>:<thread>"
-- ARGV[2]  publish command: PUBLISH, SPUBLISH, or both separated by a space
-- ARGV[3]  "fair" for a fair lock, anything else for the others
-- ARGV[4]  now, epoch milliseconds
--
-- Returns the number of holds released, 0 when the owner held none. When no holder is
-- left the waiters are told as the last unlock tells them: "0" on the channel, or, for
-- a fair lock, "0" on the channel of the waiter first in line.
local lock, channel, queue, timeouts = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, publish, fair, now = ARGV[1], ARGV[2], ARGV[3] == 'fair', tonumber(ARGV[4])
local count = tonumber(redis.call('hget', lock, owner))
if not count then
    return 0
end
redis.call('hdel', lock, owner)
if redis.call('exists', lock) == 0 then
    if fair then
        purge_stale_heads(queue, timeouts, now)
        tell_head(queue, channel, '0', publish)
    else
        for command in string.gmatch(publish, '%S+') do redis.call(command, channel, '0') end
    end
end
return count
