"""The Lua scripts of the Redis store: one per contract operation, each atomic on the server.

Redis runs a script as one atomic step: no other client's command runs in between
(https://redis.io/docs/latest/develop/interact/programmability/eval-intro/). Each script reads the server's
clock with ``TIME`` itself, so commit times, read times and therefore leases are judged by Redis' clock alone,
never by a handler instance's. Redis 7 replicates a script by its effects, so ``TIME`` before a write is allowed.

Keys of one collection ``C`` share the hash tag ``{C}`` (https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#hash-tags),
so every key a script touches lies in one slot:

==========================  ==============================================================================
key                         holds
==========================  ==============================================================================
``{C}:run:<run id>``        the record: a hash (:mod:`.values`), expiring at its ``expire_at``
``{C}:clock``               the last version issued in the collection (microseconds)
``{C}:job:<job name>``      sorted set of run ids by ``schedule_time`` (microseconds): one job's runs
``{C}:ids``                 sorted set of every run id, all scored 0, so ``ZRANGEBYLEX`` finds an id prefix
``{C}:exp``                 sorted set of ``<run id>\\n<indexed job name>`` by expiry (milliseconds)
==========================  ==============================================================================

**Versions.** A write's version is ``TIME`` in microseconds, but at least one more than the last version issued
in the collection (``{C}:clock``): strictly increasing per record, also across a delete and a new create, and
never behind a version a client holds even if the server's clock steps back. A read's time is ``TIME``, never
behind ``{C}:clock``.

**Expiry.** The record expires at its ``expire_at``, rounded up to the millisecond (``PEXPIREAT``): Redis never
returns an expired key, so there is no TTL lag. Each index key expires with the last of the records it holds
(``PEXPIREAT`` when later than its own expiry), so an index never outlives its records; entries of records
that expired before their index are removed by every create (up to :data:`PRUNE_PER_CREATE`, found through
``{C}:exp``) and skipped and removed by every history read. Redis 7.0 or newer (``PEXPIRETIME``).

**Arguments of the writing scripts** (``ARGV``): the key prefix ``{C}:``, the run id, the expected version
(``""`` for a create), then the index operations for ``job_name``, ``schedule_time`` and ``expire_at`` (``""``
keep, ``"-"`` unset, ``"t"`` this write's time, ``"=<value>"`` set), the number of field operations, and per
field operation ``kind, name, value``: ``v`` stores the encoded value, ``t`` this write's time, ``i`` adds the
integer ``value`` to a stored number (absent counts as 0). Every check runs before the first write, so a
refused script writes nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

#: Index entries of expired records a create removes, at most (each create adds at most one of each).
PRUNE_PER_CREATE = 16

_COMMON = r"""
local P = ARGV[1]
local function time_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fmt(n)
  return string.format('%d', n)
end
local function clock_now()
  local us = time_us()
  local hw = tonumber(redis.call('GET', P .. 'clock') or '0')
  if hw > us then return hw end
  return us
end
"""

_WRITE = r"""
local function next_version()
  local us = time_us()
  local hw = tonumber(redis.call('GET', P .. 'clock') or '0')
  if us <= hw then us = hw + 1 end
  redis.call('SET', P .. 'clock', fmt(us))
  return us
end
local function extend(ikey, exp_ms, existed)
  if exp_ms < 0 then
    redis.call('PERSIST', ikey)
  elseif existed == 0 then
    redis.call('PEXPIREAT', ikey, fmt(exp_ms))
  else
    local current = redis.call('PEXPIRETIME', ikey)
    if current >= 0 and current < exp_ms then redis.call('PEXPIREAT', ikey, fmt(exp_ms)) end
  end
end
local function index_add(ikey, score, member, exp_ms)
  local existed = redis.call('EXISTS', ikey)
  redis.call('ZADD', ikey, fmt(score), member)
  extend(ikey, exp_ms, existed)
end
local function prepare(key, is_new)
  -- every check before any write: returns the hash fields to set (a 't' value is filled in later) or an error
  local n = tonumber(ARGV[7])
  local sets, times = {}, {}
  for i = 0, n - 1 do
    local kind, name, value = ARGV[8 + 3 * i], ARGV[9 + 3 * i], ARGV[10 + 3 * i]
    local field = 'f:' .. name
    if kind == 'v' then
      sets[#sets + 1] = field
      sets[#sets + 1] = value
    elseif kind == 't' then
      sets[#sets + 1] = field
      sets[#sets + 1] = false
      times[#times + 1] = #sets
    elseif kind == 'i' then
      local number = 0
      local old = false
      if not is_new then old = redis.call('HGET', key, field) end
      if old then
        number = nil
        if string.sub(old, 1, 1) == 'j' then number = tonumber(string.sub(old, 2)) end
        if number == nil then
          return nil, 'INVALID increment of field ' .. name .. ', which does not hold a number'
        end
      end
      local total = number + tonumber(value)
      sets[#sets + 1] = field
      if total == math.floor(total) and math.abs(total) < 9007199254740992 then
        sets[#sets + 1] = 'j' .. fmt(total)
      else
        sets[#sets + 1] = 'j' .. string.format('%.17g', total)
      end
    else
      return nil, 'INVALID field operation ' .. tostring(kind)
    end
  end
  return {sets = sets, times = times}, nil
end
local function index_value(op, old, v)
  if op == '' then return old end
  if op == '-' then return false end
  if op == 't' then return fmt(v) end
  return string.sub(op, 2)
end
local function write(key, id, plan, v, is_new)
  local old_job, old_st = false, false
  if not is_new then
    old_job = redis.call('HGET', key, '_job')
    old_st = redis.call('HGET', key, '_st')
  end
  for _, at in ipairs(plan.times) do plan.sets[at] = 't' .. fmt(v) end
  if is_new then redis.call('HSET', key, '_v', fmt(v), '_c', fmt(v)) else redis.call('HSET', key, '_v', fmt(v)) end
  for i = 1, #plan.sets, 2 do redis.call('HSET', key, plan.sets[i], plan.sets[i + 1]) end
  local new_job = index_value(ARGV[4], old_job, v)
  local new_st = index_value(ARGV[5], old_st, v)
  if new_job then redis.call('HSET', key, '_job', new_job) elseif old_job then redis.call('HDEL', key, '_job') end
  if new_st then redis.call('HSET', key, '_st', new_st) elseif old_st then redis.call('HDEL', key, '_st') end
  local exp_op = ARGV[6]
  local exp_ms = -1
  if exp_op == '' then
    if not is_new then exp_ms = redis.call('PEXPIRETIME', key) end
  elseif exp_op == '-' or exp_op == 't' then
    redis.call('PERSIST', key)
  else
    exp_ms = tonumber(string.sub(exp_op, 2))
    redis.call('PEXPIREAT', key, fmt(exp_ms))
  end
  local alive = redis.call('EXISTS', key) == 1
  local was = (old_job and old_st) and old_job or false
  local now = (alive and new_job and new_st) and new_job or false
  if was and was ~= now then redis.call('ZREM', P .. 'job:' .. was, id) end
  if now then index_add(P .. 'job:' .. now, tonumber(new_st), id, exp_ms) end
  if alive then index_add(P .. 'ids', 0, id, exp_ms) else redis.call('ZREM', P .. 'ids', id) end
  local old_member = id .. '\n' .. (was or '')
  local new_member = id .. '\n' .. (now or '')
  if (not is_new) and (old_member ~= new_member or not alive or exp_ms < 0) then
    redis.call('ZREM', P .. 'exp', old_member)
  end
  if alive and exp_ms >= 0 then index_add(P .. 'exp', exp_ms, new_member, exp_ms) end
end
"""

_PRUNE = r"""
local function prune(now_ms, most)
  local ekey = P .. 'exp'
  local stale = redis.call('ZRANGEBYSCORE', ekey, '-inf', fmt(now_ms), 'LIMIT', '0', fmt(most))
  for _, member in ipairs(stale) do
    local sep = string.find(member, '\n', 1, true)
    local id, job = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
    local rkey = P .. 'run:' .. id
    if redis.call('EXISTS', rkey) == 0 then
      redis.call('ZREM', P .. 'ids', id)
      if job ~= '' then redis.call('ZREM', P .. 'job:' .. job, id) end
      redis.call('ZREM', ekey, member)
    else
      -- the id lives again (a new record after the old one expired): drop what only the old one had
      local cur_job, cur_st = redis.call('HGET', rkey, '_job'), redis.call('HGET', rkey, '_st')
      local indexed = (cur_job and cur_st) and cur_job or ''
      if member ~= id .. '\n' .. indexed then
        if job ~= '' and job ~= indexed then redis.call('ZREM', P .. 'job:' .. job, id) end
        redis.call('ZREM', ekey, member)
      end
    end
  end
end
"""

#: Put-if-absent. KEYS[1] the record. Returns ``{1, version}``, or ``{0, now, record}`` when the record exists.
CREATE = _COMMON + _WRITE + _PRUNE + r"""
local key, id = KEYS[1], ARGV[2]
if redis.call('EXISTS', key) == 1 then
  return {0, clock_now(), redis.call('HGETALL', key)}
end
local plan, err = prepare(key, true)
if err then return redis.error_reply(err) end
local v = next_version()
write(key, id, plan, v, true)
prune(math.floor(v / 1000), """ + str(PRUNE_PER_CREATE) + r""")
return {1, v}
"""

#: The first line of a script that runs on a full instance (``maxmemory`` reached with ``noeviction``), where Redis
#: refuses every other write with ``OOM`` (https://redis.io/docs/latest/develop/interact/programmability/eval-intro/#eval-flags).
#: Only the holder's writes of an existing record carry it (fenced update: renewal, completion, failure record,
#: takeover; fenced delete: release), so a run that is running or ran can always renew its lease and record its
#: outcome: a refused renewal lets the lease lapse under the live attempt, a refused completion lets a retry run
#: the job again. A claim (``create``) makes a new record and stays refused: its delivery answers ``store_error``
#: with the job not run. Each such write grows memory by at most one record (:data:`.values.MAX_RECORD_BYTES`).
ALLOW_OOM = "#!lua flags=allow-oom\n"

#: Fenced update. KEYS[1] the record. Returns ``{1, version}``, or ``{0, now}`` when it is gone or changed.
UPDATE = ALLOW_OOM + _COMMON + _WRITE + r"""
local key, id = KEYS[1], ARGV[2]
local current = redis.call('HGET', key, '_v')
if (not current) or current ~= ARGV[3] then
  return {0, clock_now()}
end
local plan, err = prepare(key, false)
if err then return redis.error_reply(err) end
local v = next_version()
write(key, id, plan, v, false)
return {1, v}
"""

#: Fenced delete. KEYS[1] the record; ARGV: prefix, run id, expected version. Returns ``{1|0, now}``.
DELETE = ALLOW_OOM + _COMMON + r"""
local key, id = KEYS[1], ARGV[2]
local current = redis.call('HGET', key, '_v')
if (not current) or current ~= ARGV[3] then
  return {0, clock_now()}
end
local job, st = redis.call('HGET', key, '_job'), redis.call('HGET', key, '_st')
local indexed = (job and st) and job or false
if indexed then redis.call('ZREM', P .. 'job:' .. indexed, id) end
redis.call('ZREM', P .. 'ids', id)
redis.call('ZREM', P .. 'exp', id .. '\n' .. (indexed or ''))
redis.call('DEL', key)
return {1, clock_now()}
"""

#: Read. KEYS[1] the record; ARGV: prefix, run id. Returns ``{now, record}`` (an empty record: absent).
READ = _COMMON + r"""
return {clock_now(), redis.call('HGETALL', KEYS[1])}
"""

#: One page of one job's runs, newest first. ARGV: prefix, job name, max score (``+inf``, ``(<us>`` or ``<us>``),
#: min score, page size, cursor score and cursor run id (``""``: first page). Returns ``{now, {{id, record}...}}``.
JOB_PAGE = _COMMON + r"""
local job, max, min, size = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local cursor_score, cursor_id = ARGV[6], ARGV[7]
local ikey = P .. 'job:' .. job
local function at_or_after(a, b)
  -- a >= b byte by byte, as Redis orders a sorted set's members (Lua's own < follows the server's locale)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a >= #b
end
local out, offset, batch = {}, 0, size + 8
while #out < size do
  local got = redis.call('ZREVRANGEBYSCORE', ikey, max, min, 'WITHSCORES', 'LIMIT', fmt(offset), fmt(batch))
  if #got == 0 then break end
  for i = 1, #got, 2 do
    local id, score = got[i], got[i + 1]
    offset = offset + 1
    if not (cursor_id ~= '' and tonumber(score) == tonumber(cursor_score) and at_or_after(id, cursor_id)) then
      local rkey = P .. 'run:' .. id
      local cur_job = redis.call('HGET', rkey, '_job')
      if cur_job == job then
        out[#out + 1] = {id, redis.call('HGETALL', rkey)}
        if #out == size then break end
      else
        redis.call('ZREM', ikey, id)
        offset = offset - 1
        if not cur_job and redis.call('EXISTS', rkey) == 0 then
          redis.call('ZREM', P .. 'ids', id)
          redis.call('ZREM', P .. 'exp', id .. '\n' .. job)
        end
      end
    end
  end
  if #got < 2 * batch then break end
end
return {clock_now(), out}
"""

#: Records by run id prefix, in run id order. ARGV: prefix, run id prefix (lower-case hex), limit.
#: Returns ``{now, {{id, record}...}}``, having read at most ``limit`` records.
ID_PREFIX = _COMMON + r"""
local prefix, limit = ARGV[2], tonumber(ARGV[3])
local ikey = P .. 'ids'
local out, offset, batch = {}, 0, limit + 8
while #out < limit do
  local got = redis.call('ZRANGEBYLEX', ikey, '[' .. prefix, '(' .. prefix .. 'g', 'LIMIT', fmt(offset), fmt(batch))
  if #got == 0 then break end
  for _, id in ipairs(got) do
    offset = offset + 1
    local record = redis.call('HGETALL', P .. 'run:' .. id)
    if #record > 0 then
      out[#out + 1] = {id, record}
      if #out == limit then break end
    else
      redis.call('ZREM', ikey, id)
      offset = offset - 1
    end
  end
  if #got < batch then break end
end
return {clock_now(), out}
"""


@dataclass(frozen=True)
class Script:
    """One script: its name (the contract operation), its source and the SHA-1 ``EVALSHA`` names it by."""

    name: str
    source: str

    @property
    def sha(self) -> str:
        return hashlib.sha1(self.source.encode()).hexdigest()


SCRIPTS = {s.name: s for s in (Script("create", CREATE), Script("update", UPDATE), Script("delete", DELETE),
                                Script("read", READ), Script("job_page", JOB_PAGE), Script("id_prefix", ID_PREFIX))}
#: SHA-1 -> script name, to tell an ``EVALSHA`` on the wire.
BY_SHA = {s.sha: s.name for s in SCRIPTS.values()}
