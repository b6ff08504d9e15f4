-- The verification harness's fenced resource (the verify worker's protected write):
-- accepts a write only with a token at least the highest it has accepted (an equal one
-- is the same grant writing again), and keeps the accepted tokens in order so that the
-- fencing checker can read what it accepted.
--
-- KEYS[1]  the highest accepted token
-- KEYS[2]  the count of accepted writes
-- KEYS[3]  the accepted tokens, in order (a list)
-- ARGV[1]  the writer's token
--
-- Returns {1, previous highest} when accepted, {0, highest} when refused.
local top = tonumber(redis.call('GET', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
if token < top then return {0, top} end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('INCR', KEYS[2])
redis.call('RPUSH', KEYS[3], ARGV[1])
return {1, top}
