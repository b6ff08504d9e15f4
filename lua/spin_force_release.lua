-- Delete a spin lock whoever holds it (Redisson RSpinLock forceUnlock).
--
-- KEYS[1]  the lock hash
-- ARGV[]   none
--
-- Nothing is published (spin-lock waiters poll; Redisson publishes nothing here either).
--
-- Returns 1 when a lock was deleted, 0 when there was none.
local lock = KEYS[1]

if redis.call('del', lock) == 1 then
    return 1
end
return 0
