package redis

import goredis "github.com/redis/go-redis/v9"

// Every state change is one Lua script, atomic on the node that holds the
// slot. Times are unix microseconds passed by the client (its clock judges
// "due", so a node never returns an entry due after its own now, or its
// own now plus the ahead its Pop asked for); scores
// stay exact as doubles up to 2^53 µs (year 2255).
//
// A token record is "token|priority|due" ("token|due" from before
// priorities: priority 0). In a backlog (more due in a slot than a pop
// takes) the pop moves what is due to ready, scored by rank (due less
// priority × step, task.Rank), and takes the lowest ranks first.

// addScript puts entries in a slot, skipping those in flight under the same
// claim; a different token replaces the entry (the newer claim is live).
//
//	KEYS[1] store, KEYS[2] prepare, KEYS[3] tok, KEYS[4] ready
//	ARGV    quadruplets: id, token, due, priority
//	returns {head before, head after} (scores as strings; "" when empty)
var addScript = goredis.NewScript(`
local before = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2] or ''
for i = 1, #ARGV, 4 do
  local id, tok, due, prio = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3]
  local cur = redis.call('HGET', KEYS[3], id)
  local inflight = redis.call('ZSCORE', KEYS[2], id)
  if not (inflight and cur and string.match(cur, '^(%-?%d+)|') == tok) then
    redis.call('ZREM', KEYS[4], id)
    redis.call('ZADD', KEYS[1], due, id)
    redis.call('HSET', KEYS[3], id, tok .. '|' .. prio .. '|' .. due)
  end
end
local after = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2] or ''
return {before, after}
`)

// popScript first returns prepare entries whose visibility deadline passed
// to the store (the reaper), then moves up to max due entries from store to
// prepare, scored by their visibility deadline.
//
//	KEYS[1] store, KEYS[2] prepare, KEYS[3] tok, KEYS[4] ready
//	ARGV[1] now, ARGV[2] visibility deadline, ARGV[3] max, ARGV[4] priority step (µs),
//	ARGV[5] horizon: entries due by it are taken (now, or later by the Pop's ahead)
//	returns {id1, "token|priority|due", id2, …, next store score, next prepare score}
//	(the next store score is ready's lowest rank while ready holds entries)
var popScript = goredis.NewScript(`
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, 1000)
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[2], id)
  local v = redis.call('HGET', KEYS[3], id)
  if v then
    redis.call('ZADD', KEYS[1], 'NX', string.match(v, '|(%d+)$'), id)
  end
end
local max = tonumber(ARGV[3])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[5], 'LIMIT', 0, max)
if redis.call('ZCARD', KEYS[4]) > 0 or (#due == max and #redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[5], 'LIMIT', max, 1) > 0) then
  -- a backlog: what is due goes to ready by rank (10,000 per call)
  local all = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[5], 'WITHSCORES', 'LIMIT', 0, 10000)
  for i = 1, #all, 2 do
    local v = redis.call('HGET', KEYS[3], all[i]) or ''
    local prio = tonumber(string.match(v, '^%-?%d+|(%d)|') or '0')
    redis.call('ZADD', KEYS[4], tonumber(all[i+1]) - prio * tonumber(ARGV[4]), all[i])
    redis.call('ZREM', KEYS[1], all[i])
  end
  due = redis.call('ZRANGE', KEYS[4], 0, max - 1)
  for _, id in ipairs(due) do
    redis.call('ZREM', KEYS[4], id)
  end
end
local out = {}
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZADD', KEYS[2], ARGV[2], id)
  out[#out+1] = id
  out[#out+1] = redis.call('HGET', KEYS[3], id) or ''
end
out[#out+1] = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')[2] or redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2] or ''
out[#out+1] = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2] or ''
return out
`)

// ackScript removes in-flight entries for good; the token record goes too
// unless a newer claim of the task waits in the store.
//
//	KEYS[1] store, KEYS[2] prepare, KEYS[3] tok, KEYS[4] ready
//	ARGV    pairs: id, token
//	returns the number of entries removed from prepare
var ackScript = goredis.NewScript(`
local n = 0
for i = 1, #ARGV, 2 do
  n = n + redis.call('ZREM', KEYS[2], ARGV[i])
  local v = redis.call('HGET', KEYS[3], ARGV[i])
  if v and string.match(v, '^(%-?%d+)|') == ARGV[i+1] and not redis.call('ZSCORE', KEYS[1], ARGV[i]) and not redis.call('ZSCORE', KEYS[4], ARGV[i]) then
    redis.call('HDEL', KEYS[3], ARGV[i])
  end
end
return n
`)

// nackScript returns in-flight entries to the store, due at retryAt.
//
//	KEYS[1] store, KEYS[2] prepare, KEYS[3] tok, KEYS[4] ready
//	ARGV[1] retryAt, then pairs: id, token
//	returns the number of entries returned
var nackScript = goredis.NewScript(`
local n = 0
for i = 2, #ARGV, 2 do
  local id, tok = ARGV[i], ARGV[i+1]
  local v = redis.call('HGET', KEYS[3], id)
  if redis.call('ZREM', KEYS[2], id) == 1 and v and string.match(v, '^(%-?%d+)|') == tok then
    redis.call('ZADD', KEYS[1], ARGV[1], id)
    redis.call('HSET', KEYS[3], id, tok .. '|' .. (string.match(v, '^%-?%d+|(%d)|') or '0') .. '|' .. ARGV[1])
    n = n + 1
  end
end
return n
`)

// removeScript drops waiting entries (cancelled tasks).
//
//	KEYS[1] store, KEYS[2] prepare, KEYS[3] tok, KEYS[4] ready
//	ARGV    ids
//	returns the number removed
var removeScript = goredis.NewScript(`
local n = 0
for _, id in ipairs(ARGV) do
  if redis.call('ZREM', KEYS[1], id) + redis.call('ZREM', KEYS[4], id) > 0 then
    n = n + 1
    if not redis.call('ZSCORE', KEYS[2], id) then
      redis.call('HDEL', KEYS[3], id)
    end
  end
end
return n
`)
