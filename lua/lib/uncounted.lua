-- The lost-reply check's shared rules (prepended to adopt.lua and adopt_read.lua at
-- build time, see src/scripts.rs; the script itself follows this text).

-- How many holds `owner` has on `lock` in all (0 when none).
local function holds_of(lock, owner)
    return tonumber(redis.call('hget', lock, owner) or '0') or 0
end

-- The PTTL of `key` after raising it to at least `renew_ms` (0: left as it is). A longer
-- TTL is never shortened (a write lock's added leases), and a key that is gone (-2)
-- stays gone.
local function renewed_ttl(key, renew_ms)
    local ttl = redis.call('pttl', key)
    if renew_ms > 0 and ttl ~= -2 and ttl < renew_ms then
        redis.call('pexpire', key, renew_ms)
        return renew_ms
    end
    return ttl
end
