-- The start of a read-write lock release, shared by both halves (prepended to their
-- release scripts at build time after lib/latch.lua, see src/scripts.rs).

-- A replayed outcome of this request, or the lock's mode. With no lock at all this is
-- Redisson's quirk: the half's message is published all the same and the release
-- answers nil. Returns (true, outcome) when the release is decided already, else
-- (false, mode).
local function begin_release(lock, channel, latch, latch_ms, message, publish)
    local replay = replayed(latch)
    if replay ~= nil then
        return true, replay
    end
    local mode = redis.call('hget', lock, 'mode')
    if mode == false then
        settled(latch, latch_ms, 1)
        for command in string.gmatch(publish, '%S+') do redis.call(command, channel, message) end
        return true, nil
    end
    return false, mode
end
