#!lua flags=allow-cross-slot-keys
-- Renew this client's read holds of many read-write locks of one cluster master at
-- once. The per-node form of renew_reads.lua (see renew_local.lua for why the keys are
-- named in ARGV).
--
-- KEYS[]     none
-- ARGV[1]    new lease in milliseconds
-- then, for each lock: its hash, its key prefix ({name}, or the bare name when it has
-- braces), the number of owners n, and n read owner fields of this client.
--
-- For each owner that still has c read holds, its timeout keys
-- <prefix>:<owner>:rwlock_timeout:c .. 1 get the new lease; a hash with at least one
-- such owner gets it too.
--
-- Returns an array with one element per owner, in ARGV order: 1 when the owner still
-- held reads (and was renewed), 0 when it did not (or the key has another type), -1
-- when this node could not look (the slot is served elsewhere or the key migrated).
local renewed = {}
local arg = 2
while arg <= #ARGV do
    local hash, prefix, owners = ARGV[arg], ARGV[arg + 1], tonumber(ARGV[arg + 2])
    arg = arg + 3
    local alive = false
    for _ = 1, owners do
        local owner = ARGV[arg]
        arg = arg + 1
        local holds = redis.pcall('hget', hash, owner)
        if type(holds) == 'table' then
            local err = tostring(holds.err or holds)
            renewed[#renewed + 1] = string.find(err, 'WRONGTYPE', 1, true) and 0 or -1
        else
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
    end
    if alive then
        redis.call('pexpire', hash, ARGV[1])
    end
end
return renewed
