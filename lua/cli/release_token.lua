-- Delete a string-token lock when it holds the given token (the release of redsync and
-- redis-py, for `redmutex unlock NAME --owner TOKEN`).
--
-- KEYS[1]  the lock
-- ARGV[1]  the token
--
-- Returns 1 when the lock held the token and was deleted, 0 otherwise.
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
