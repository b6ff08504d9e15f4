-- Release every read and write hold of one owner of a read-write lock, whoever runs it
-- (`redmutex unlock NAME --owner ID:THREAD`).
--
-- KEYS[1]  the lock hash
-- KEYS[2]  its channel, redisson_rwlock:{name}
-- ARGV[1]  the owner's read field "<client-id>:<thread>" (its write field adds ":write")
-- ARGV[2]  publish command: PUBLISH, SPUBLISH, or both separated by a space
-- ARGV[3]  the prefix of every read-hold timeout key, `{name}` (the bare name when it has
--          braces): a hold's key is <prefix>:<owner>:rwlock_timeout:<n>
--
-- Returns the number of holds released, 0 when the owner held none. The owner's
-- read-hold timeout keys go with them. When no holder is left the hash is deleted;
-- when the writer left and readers remain the mode turns to read. Either way "1" is
-- published, which wakes every waiter (Redisson's write-unlock message), since readers
-- and a writer may all be waiting.
local lock, channel = KEYS[1], KEYS[2]
local owner, publish, prefix = ARGV[1], ARGV[2], ARGV[3]
local writer = owner .. ':write'
local reads = tonumber(redis.call('hget', lock, owner)) or 0
local writes = tonumber(redis.call('hget', lock, writer)) or 0
if reads == 0 and writes == 0 then
    return 0
end
redis.call('hdel', lock, owner, writer)
for n = 1, reads do
    redis.call('del', prefix .. ':' .. owner .. ':rwlock_timeout:' .. n)
end
if redis.call('hlen', lock) <= 1 then
    redis.call('del', lock)
elseif writes > 0 then
    redis.call('hset', lock, 'mode', 'read')
end
for command in string.gmatch(publish, '%S+') do redis.call(command, channel, '1') end
return reads + writes
