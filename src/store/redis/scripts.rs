//! The Lua scripts of the Redis store, written once in parts and put together per topology.
//!
//! On one server a script may touch any key, so an append, a listing and a delete are each one
//! script over the thread and its project index, as they always were. On a cluster a script
//! may touch the keys of one slot only: a thread's keys share its hash tag, and the project
//! index (another slot) is updated by a second script after the thread's own ([`INDEX`]); the
//! listing and `latest` read the index, then the threads (in `super`). The parts are the same
//! text either way, so the rules (types checked, owner, max turns, a retried append recognised
//! by its turn's id) have one body.

/// The thread's checks, writing nothing. KEYS[1]: header, KEYS[2]: turns. ARGV: project, turn
/// JSON, max turns, TTL in ms, thread id, created_ms, format version, index cap, owner, the
/// turn's tool, its time (ms), the title, the turn's id. Leaves `header_t`, `n` (turns stored),
/// `seen` (the position the header holds for the turn's id, `turn:<id>`, else false) and `again`
/// (the turn is stored already: an append retried after its answer was lost, as in a failover,
/// found by its id wherever it is, or, for a turn stored before turns had ids, as the last one)
/// for the write.
macro_rules! thread_check {
    () => {
        r#"
local header_t = redis.call('TYPE', KEYS[1])['ok']
local turns_t = redis.call('TYPE', KEYS[2])['ok']
if header_t ~= 'none' and header_t ~= 'hash' then
  return {'corrupt', 'its key holds a ' .. header_t .. ', not a thread header'}
end
if turns_t ~= 'none' and turns_t ~= 'list' then
  return {'corrupt', 'its turns key holds a ' .. turns_t .. ', not a list of turns'}
end
if header_t == 'none' then
  if turns_t ~= 'none' then
    return {'corrupt', 'it has turns but no header'}
  end
else
  if redis.call('HGET', KEYS[1], 'v') ~= ARGV[7] then
    return {'corrupt', 'its header has an unknown format version'}
  end
  local owner = redis.call('HGET', KEYS[1], 'owner')
  if not owner or owner == '' then owner = 'local' end
  if owner ~= ARGV[9] then
    return {'foreign'}
  end
  if turns_t == 'none' then
    return {'corrupt', 'its header has no turns'}
  end
end
local n = redis.call('LLEN', KEYS[2])
local seen = header_t ~= 'none' and redis.call('HGET', KEYS[1], 'turn:' .. ARGV[13])
local again = seen or (n > 0 and redis.call('LINDEX', KEYS[2], -1) == ARGV[2])
if not again and n >= tonumber(ARGV[3]) then
  return {'full', n}
end
"#
    };
}

/// The thread's write, after [`thread_check!`]: header created, turn pushed and its position
/// kept under its id (unless `again`; a turn found by its id answers with its position), the
/// listing's summary in the header (`tools` space-separated, first use first; `last_ms`;
/// `title` and `first_ms` set by the first turn), both keys' TTL refreshed.
macro_rules! thread_write {
    () => {
        r#"
if header_t == 'none' then
  redis.call('HSET', KEYS[1], 'v', ARGV[7], 'project', ARGV[1], 'created_ms', ARGV[6], 'owner', ARGV[9])
end
if not again then
  n = redis.call('RPUSH', KEYS[2], ARGV[2])
  redis.call('HSET', KEYS[1], 'turn:' .. ARGV[13], n)
elseif seen then
  n = tonumber(seen)
end
local tools = redis.call('HGET', KEYS[1], 'tools') or ''
if not string.find(' ' .. tools .. ' ', ' ' .. ARGV[10] .. ' ', 1, true) then
  if tools == '' then tools = ARGV[10] else tools = tools .. ' ' .. ARGV[10] end
end
redis.call('HSET', KEYS[1], 'tools', tools, 'last_ms', ARGV[11])
if redis.call('HEXISTS', KEYS[1], 'title') == 0 then
  redis.call('HSET', KEYS[1], 'title', ARGV[12], 'first_ms', ARGV[11])
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
"#
    };
}

/// The project index's check. The index is the last key (`KEYS[3]` on one server, `KEYS[1]` in
/// the cluster's index script).
macro_rules! index_check {
    () => {
        r#"
local index = KEYS[#KEYS]
local index_t = redis.call('TYPE', index)['ok']
if index_t ~= 'none' and index_t ~= 'zset' then
  return {'corrupt', 'the project index holds a ' .. index_t .. ', not a sorted set'}
end
"#
    };
}

/// The project index's write: the thread (ARGV[5]) scored by a per-project write counter,
/// capped at ARGV[8] entries, expiring with its newest thread (ARGV[4]).
macro_rules! index_write {
    () => {
        r#"
local top = redis.call('ZREVRANGE', index, 0, 0, 'WITHSCORES')
local score = 1
if top[2] then score = tonumber(top[2]) + 1 end
redis.call('ZADD', index, score, ARGV[5])
redis.call('ZREMRANGEBYRANK', index, 0, -(tonumber(ARGV[8]) + 1))
redis.call('PEXPIRE', index, ARGV[4])
"#
    };
}

/// Deleting a thread's keys, for its owner only. KEYS[1]: header, KEYS[2]: turns. ARGV[1]:
/// owner, ARGV[2]: thread id.
macro_rules! delete_thread {
    () => {
        r#"
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then return {'none'} end
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner or owner == '' then owner = 'local' end
if owner ~= ARGV[1] then return {'foreign'} end
redis.call('DEL', KEYS[1], KEYS[2])
"#
    };
}

/// One server: appends one turn and indexes the thread, in one step. KEYS: header, turns, project
/// index. Returns `{"ok", count}`, `{"full", count}`, `{"foreign"}` or `{"corrupt", why}`.
pub const APPEND: &str = concat!(
    thread_check!(),
    index_check!(),
    thread_write!(),
    index_write!(),
    "return {'ok', n}\n"
);

/// A cluster: appends one turn. KEYS: header, turns (one slot). Answers as [`APPEND`].
pub const APPEND_THREAD: &str = concat!(thread_check!(), thread_write!(), "return {'ok', n}\n");

/// A cluster: indexes a thread after its append. KEYS: project index. ARGV: as [`APPEND`]'s
/// (the turn and title may be empty). Returns `{"ok"}` or `{"corrupt", why}`.
pub const INDEX: &str = concat!(index_check!(), index_write!(), "return {'ok'}\n");

/// One server: deletes a thread and its index entry. KEYS: header, turns, project index. ARGV:
/// owner, thread id. Returns `{"ok"}`, `{"none"}` or `{"foreign"}`.
pub const DELETE: &str = concat!(
    delete_thread!(),
    "if redis.call('TYPE', KEYS[3])['ok'] == 'zset' then redis.call('ZREM', KEYS[3], ARGV[2]) end\n",
    "return {'ok'}\n"
);

/// A cluster: deletes a thread's keys (its index entry goes next, or when a reader finds it
/// gone). KEYS: header, turns. Answers as [`DELETE`].
pub const DELETE_THREAD: &str = concat!(delete_thread!(), "return {'ok'}\n");

/// One server: the newest live thread of a project. KEYS: project index. ARGV: thread key
/// prefix. Drops index entries whose thread has expired. Returns `{"ok", id}`, `{"none"}` or
/// `{"corrupt", why}`.
pub const LATEST: &str = r#"
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return {'none'} end
if t ~= 'zset' then
  return {'corrupt', 'the project index holds a ' .. t .. ', not a sorted set'}
end
for _ = 1, 100 do
  local top = redis.call('ZREVRANGE', KEYS[1], 0, 0)
  if not top[1] then return {'none'} end
  if redis.call('EXISTS', ARGV[1] .. top[1]) == 1 then return {'ok', top[1]} end
  redis.call('ZREM', KEYS[1], top[1])
end
return {'none'}
"#;

/// One server: a listing. KEYS: project index. ARGV: thread key prefix, limit. Newest first;
/// drops index entries whose thread has expired. Returns `{"ok", {id, turns, tools, first_ms,
/// last_ms, title}…}` or `{"corrupt", why}`. Bounded: one pass over at most the index's cap.
pub const LIST: &str = r#"
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return {'ok'} end
if t ~= 'zset' then
  return {'corrupt', 'the project index holds a ' .. t .. ', not a sorted set'}
end
local out = {'ok'}
local limit = tonumber(ARGV[2])
for _, id in ipairs(redis.call('ZREVRANGE', KEYS[1], 0, -1)) do
  if #out - 1 >= limit then break end
  local h = ARGV[1] .. id
  if redis.call('EXISTS', h) == 0 then
    redis.call('ZREM', KEYS[1], id)
  else
    local f = redis.call('HMGET', h, 'tools', 'first_ms', 'last_ms', 'title', 'created_ms')
    local n = redis.call('LLEN', h .. ':turns')
    table.insert(out, {id, n, f[1] or '', f[2] or f[5] or '0', f[3] or f[5] or '0', f[4] or ''})
  end
end
return out
"#;
