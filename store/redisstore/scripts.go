package redisstore

import "github.com/redis/go-redis/v9"

// putScript writes a node's record and history if the writer may.
//
// KEYS: rec, hist. ARGV: writer epoch, observed seconds, observed nanos,
// the seq the writer read (0: none), TTL in ms, record bytes, history bytes.
// The record's value starts with a header "epoch sec nanos seq\n".
// Returns "ok", "fenced" (a higher epoch wrote), "old" (the stored record was
// observed later) or "conflict" (another write came between the writer's
// read and this one: read again).
var putScript = redis.NewScript(`
local seq = 0
local cur = redis.call('GET', KEYS[1])
if cur then
  local e, s, n, q = string.match(cur, '^(%d+) (%-?%d+) (%d+) (%d+)\n')
  if e then
    if tonumber(ARGV[1]) < tonumber(e) then return 'fenced' end
    local ws, ns = tonumber(ARGV[2]), tonumber(s)
    if ws < ns or (ws == ns and tonumber(ARGV[3]) < tonumber(n)) then return 'old' end
    seq = tonumber(q)
  end
end
if seq ~= tonumber(ARGV[4]) then return 'conflict' end
local hdr = ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. string.format('%d', seq + 1) .. '\n'
redis.call('SET', KEYS[1], hdr .. ARGV[6], 'PX', ARGV[5])
redis.call('SET', KEYS[2], ARGV[7], 'PX', ARGV[5])
return 'ok'
`)

// putRecordScript replaces a node's record, leaving its history, if the
// writer may: the fast lane's writes (store.RecordWriter).
//
// KEYS: rec, hist. ARGV: writer epoch, observed seconds, observed nanos,
// TTL in ms, record bytes. Returns "ok", "missing" (no record: Put writes
// a node first), "fenced" or "old" as putScript. The seq goes up, so that
// a Put that read before it reads again ("conflict").
var putRecordScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return 'missing' end
local e, s, n, q = string.match(cur, '^(%d+) (%-?%d+) (%d+) (%d+)\n')
if not e then return 'missing' end
if tonumber(ARGV[1]) < tonumber(e) then return 'fenced' end
local ws, ns = tonumber(ARGV[2]), tonumber(s)
if ws < ns or (ws == ns and tonumber(ARGV[3]) < tonumber(n)) then return 'old' end
local hdr = ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. string.format('%d', tonumber(q) + 1) .. '\n'
redis.call('SET', KEYS[1], hdr .. ARGV[5], 'PX', ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 'ok'
`)

// publishScript appends a health event to the feed if the writer may.
//
// KEYS: events, feed id, fence. ARGV: writer epoch, MAXLEN, a new feed id
// (used when the feed has none yet), the event bytes. Entry ids are 0-<seq>,
// seq counting events from 1. Returns {feed id, entry id} or {"fenced"}.
var publishScript = redis.NewScript(`
local f = redis.call('GET', KEYS[3])
local w = tonumber(ARGV[1])
if f and w < tonumber(f) then return {'fenced'} end
if (f and w > tonumber(f)) or (not f and w > 0) then redis.call('SET', KEYS[3], ARGV[1]) end
redis.call('SET', KEYS[2], ARGV[3], 'NX')
local fid = redis.call('GET', KEYS[2])
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '0-*', 'h', ARGV[4])
return {fid, id}
`)

// lastScript returns {feed id, seq of the newest event (0: none)}, creating
// the feed id if there is none yet.
//
// KEYS: events, feed id. ARGV: a new feed id.
var lastScript = redis.NewScript(`
redis.call('SET', KEYS[2], ARGV[1], 'NX')
local fid = redis.call('GET', KEYS[2])
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local seq = '0'
if #last > 0 then seq = string.match(last[1][1], '^0%-(%d+)$') or '0' end
return {fid, seq}
`)

// readScript returns up to ARGV[3] events after seq ARGV[2] of feed
// ARGV[1], as {"ok", feed id, entry id, event, ...}, or {"expired", why} when the feed no longer
// holds what follows seq: another feed, trimmed past it, or seq ahead of
// the feed.
//
// KEYS: events, feed id.
var readScript = redis.NewScript(`
local fid = redis.call('GET', KEYS[2])
if fid ~= ARGV[1] and not (fid == false and ARGV[1] == '') then
  return {'expired', 'token from another feed'}
end
local after = tonumber(ARGV[2])
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
if #first == 0 then
  if after > 0 then return {'expired', 'token ahead of feed'} end
  return {'ok', fid or ''}
end
local fseq = tonumber(string.match(first[1][1], '^0%-(%d+)$'))
if fseq > after + 1 then return {'expired', 'token trimmed from feed'} end
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local lseq = tonumber(string.match(last[1][1], '^0%-(%d+)$'))
if after > lseq then return {'expired', 'token ahead of feed'} end
local out = {'ok', fid}
local evs = redis.call('XRANGE', KEYS[1], '(0-' .. ARGV[2], '+', 'COUNT', ARGV[3])
for _, e in ipairs(evs) do
  out[#out + 1] = e[1]
  out[#out + 1] = e[2][2]
end
return out
`)

// unlockScript deletes the lock KEYS[1] if it still holds ARGV[1].
var unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// extendScript renews the lock KEYS[1] for ARGV[2] ms if it still holds
// ARGV[1].
var extendScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`)
