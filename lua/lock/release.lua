-- Release one hold of a reentrant lock (Redisson RLock unlock with the unlock latch
-- introduced in Redisson 3.24.1; also the non-reentrant and fenced locks', and with no
-- message the spin lock's, whose unlock publishes nothing). Runs after lib/latch.lua.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the unlock channel, redisson_lock__channel:{name}
-- KEYS[3]  the latch key, redisson_unlock_latch:{name}:<request-id>
-- ARGV[1]  the unlock message, "0"; '' to publish nothing (RSpinLock: its waiters poll)
-- ARGV[2]  lease in milliseconds re-applied after a partial release
-- ARGV[3]  owner field "<client-uuid>:<thread-number>"
-- ARGV[4]  publish command: PUBLISH, SPUBLISH, or both separated by a space
-- ARGV[5]  latch lifetime in milliseconds
--
-- Returns nil when the caller holds no hold; 0 when holds remain; 1 when the lock was
-- deleted and no message was published; {1, n} when it was deleted and the unlock
-- message reached n subscribers (summed over the publish commands). The count is only
-- for our client's fairness policy: Redisson never sees a reply, and the keys and the
-- message are what Redisson's own unlock leaves. A retry of the same request (same latch
-- key) returns the first outcome (1) again instead of releasing a second hold.
local lock, channel, latch = KEYS[1], KEYS[2], KEYS[3]
local message, lease, owner, publish, latch_ms = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local replay = replayed(latch)
if replay ~= nil then
    return replay
end
local released = release_or_delete(lock, owner, lease, latch, latch_ms)
if released == 1 and message ~= '' then
    local heard = 0
    for command in string.gmatch(publish, '%S+') do
        heard = heard + redis.call(command, channel, message)
    end
    return {1, heard}
end
return released
