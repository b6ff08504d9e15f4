-- Renew this client's read holds of many read-write locks at once (Redisson's batched
-- ReadLockTask, 4.4+: only the client's own owners are renewed).
--
-- KEYS[2i-1]  a lock hash
-- KEYS[2i]    that lock's key prefix, {name} (the bare name when it has braces)
-- ARGV[1]     new lease in milliseconds
-- then, for each lock in KEYS order: the number of owners n, followed by n read owner
-- fields "<client-uuid>:<thread-number>" of this client.
--
-- For each owner that still has c read holds, its timeout keys
-- <prefix>:<owner>:rwlock_timeout:c .. 1 get the new lease; a hash with at least one
-- such owner gets it too.
--
-- Returns an array with one element per owner, in ARGV order: 1 when the owner still
-- held reads (and was renewed), 0 when it did not. A key of the wrong type counts as not
-- held instead of failing the whole batch.
local renewed = {}
local arg = 2
for k = 1, #KEYS, 2 do
    local hash, prefix = KEYS[k], KEYS[k + 1]
    local owners = tonumber(ARGV[arg])
    arg = arg + 1
    local alive = false
    for _ = 1, owners do
        local owner = ARGV[arg]
        arg = arg + 1
        local holds = redis.pcall('hget', hash, owner)
        holds = type(holds) == 'string' and tonumber(holds) or nil
        if holds then
            for i = holds, 1, -1 do
                redis.call('pexpire', prefix .. ':' .. owner .. ':rwlock_timeout:' .. i, ARGV[1])
            end
            alive = true
            renewed[#renewed + 1] = 1
        else
            renewed[#renewed + 1] = 0
        end
    end
    if alive then
        redis.call('pexpire', hash, ARGV[1])
    end
end
return renewed
