-- Renew the leases of many locks at once (Redisson's batched LockTask, 3.44+).
--
-- KEYS[i]    a lock hash
-- ARGV[1]    new lease in milliseconds
-- ARGV[i+1]  the owner field this client holds KEYS[i] with
--
-- Returns an array: element i is 1 when the owner still holds KEYS[i] (its TTL was reset
-- to the lease), 0 when it does not, so the caller can report that hold as lost. A key of
-- the wrong type counts as not held instead of failing the whole batch.
local renewed = {}
for i = 1, #KEYS do
    local held = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
    if held == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
