-- After an acquire whose connection closed before its reply, on any kind kept in a plain
-- hash (RLock, fair, fenced, spin and non-reentrant locks, the write lock; runs after
-- lib/uncounted.lua): does the owner have more holds than its client counts, and how
-- long does the key live at least?
--
-- More holds than counted means that an acquire of this owner ran unanswered: the one
-- just sent, or an older one whose caller saw a timeout and gave up, whose hold has lived
-- unrenewed since. The count cannot tell them apart, so it cannot tell when the hold's
-- lease began: the caller dates the hold by the TTL read here, in the same script.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  a fenced lock's token counter, redisson_lock_token:{name} (read, never
--          written); for the other kinds the hash again, never read as a counter
-- ARGV[1]  owner field
-- ARGV[2]  how many holds of the owner its client counts
-- ARGV[3]  milliseconds: the hold is under the watchdog, so renew it now to a TTL of at
--          least this (the watchdog timeout); 0 for an explicit lease, whose TTL is left
--          as its acquire set it (nobody may extend what that acquire granted)
-- ARGV[4]  "1" to read the token counter, anything else not to
--
-- Returns nil when the owner has at most ARGV[2] holds (nothing changes then). Otherwise
-- {pttl, token}: the key's PTTL in milliseconds after any renewal (-1 when it has no
-- TTL), and the token counter's value (nil when not asked for or absent).
local lock, counter = KEYS[1], KEYS[2]
local owner, counted, renew_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

if holds_of(lock, owner) <= counted then
    return nil
end
local ttl = renewed_ttl(lock, renew_ms)
local token = false
if ARGV[4] == '1' then
    token = redis.call('get', counter)
end
return {ttl, token}
