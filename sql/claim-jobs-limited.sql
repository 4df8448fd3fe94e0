-- sql/claim-jobs.sql for a queue with limits (docs/flow-control.md), same parameters and answer, and the same start of
-- a job (its `claimed` step: keep the two alike); a statement of its own so that a queue without limits pays nothing. Before it picks jobs
-- it takes the reservations they need, FOR UPDATE SKIP LOCKED: free concurrency slots (limit_slots, job_id null) and
-- rate rows last used at least durationMs ago (limit_rate_slots); it starts at most as many jobs as it holds of each,
-- and writes each started job's id and lock token into a slot (and the slot's number into the job, jobs.limit_slot),
-- and now() into a rate row, in this same statement.
-- How many are free is never counted from a snapshot: a row is only counted once this statement holds its lock, and
-- a row changed by a transaction that committed meanwhile is re-checked on its newest version (READ COMMITTED), so a
-- slot taken by another claim is not taken again. The slots are freed by the trigger jobs_slot_released when the run
-- leaves 'active', by primary key, fenced by the run's lock token. Nothing starts while ctx.rateLimit holds the queue
-- (rate_paused_until) or while it is paused, nor for a queue with group limits (or a held group), whose claims are
-- sql/claim-jobs-grouped.sql: a worker that read the queue's mode before a group limit was set finds nothing here
-- and reads it again. taken_slots and used_rates run although nothing reads them (a WITH
-- that changes rows always runs to completion).
with settings as materialized (
  select s.concurrency, s.rate_max, s.rate_duration_ms,
    s.paused or coalesce(s.rate_paused_until > now(), false) or :PGONCE_SCHEMA._grouped(s) as held
  from (select 1) one left join :PGONCE_SCHEMA.queue_settings s on s.queue = $1
), slots as materialized (
  select l.slot from :PGONCE_SCHEMA.limit_slots l
  where l.queue = $1 and l.group_id = '' and l.job_id is null
    and l.slot <= (select s.concurrency from settings s)
  order by l.slot
  limit $2
  for update skip locked
), rates as materialized (
  select r.slot from :PGONCE_SCHEMA.limit_rate_slots r
  where r.queue = $1 and r.group_id = '' and r.slot <= (select s.rate_max from settings s)
    and r.used_at <= now() - (select make_interval(secs => s.rate_duration_ms / 1000.0) from settings s)
  order by r.slot
  -- No more rate rows than the slots taken allow starts: a row locked and not used is a write for nothing.
  limit (select case when s.concurrency is null then $2::bigint else least($2::bigint, (select count(*) from slots)) end
         from settings s)
  for update skip locked
), room as materialized (
  select case when coalesce(s.held, false) then 0 else least($2::bigint,
      case when s.concurrency is null then $2::bigint else (select count(*) from slots) end,
      case when s.rate_max is null then $2::bigint else (select count(*) from rates) end) end as n
  from settings s
), picked as materialized (
  select array(
    select ctid from :PGONCE_SCHEMA.jobs
    where queue = $1 and :PGONCE_SCHEMA._is_queued(state) and run_at <= now()
      and (priority, run_at, id) > ($6::integer, timestamptz 'epoch' + $7::bigint * interval '1 microsecond', $8::bigint)
      and (select n from room) > 0
    order by priority, run_at, id
    limit (select n from room)
    for update skip locked) as ctids
), assigned as materialized (
  -- The i-th job picked (the queue's order) takes the i-th slot locked (by slot number); no slot without a concurrency
  -- limit. Driven by the unnested arrays, each job row found by its ctid, each slot row below by primary key: a join of
  -- the slot rows with a subquery of the pairs was once planned as a nested loop re-sorting the pairs for every slot
  -- row of the queue (claims of 500 jobs took seconds), and reading each row's slot from arrays with array_position()
  -- is quadratic.
  select p.ctid, f.slot
  from unnest((select p.ctids from picked p)) with ordinality as p(ctid, rn)
  left join (select s.slot, row_number() over (order by s.slot) as rn from slots s) f on f.rn = p.rn
), claimed as (
  update :PGONCE_SCHEMA.jobs j
  set state = 'active', attempts = j.attempts + 1, started_at = now(),
      lock_token = ($5::text || overlay(lpad(to_hex(j.id), 16, '0') placing '-' from 5 for 0))::uuid,
      timeout_at = now() + make_interval(secs => coalesce(j.timeout_ms, $9::integer) / 1000.0),
      locked_until = least(now() + make_interval(secs => $3::bigint / 1000.0),
        now() + make_interval(secs => coalesce(j.timeout_ms, $9::integer) / 1000.0)),
      locked_by = $4, limit_slot = u.slot
  from unnest((select array_agg(a.ctid) from assigned a), (select array_agg(a.slot) from assigned a)) as u(ctid, slot)
  where j.ctid = u.ctid and set_config('synchronous_commit', 'off', true) is not null
  returning j.*
), taken_slots as (
  -- Each slot records the run holding it (job id and lock token, which its end must match to free it).
  update :PGONCE_SCHEMA.limit_slots l set job_id = u.id, lock_token = u.lock_token
  from unnest((select array_agg(c.limit_slot) from claimed c where c.limit_slot is not null),
              (select array_agg(c.id) from claimed c where c.limit_slot is not null),
              (select array_agg(c.lock_token) from claimed c where c.limit_slot is not null)) as u(slot, id, lock_token)
  where l.queue = $1 and l.group_id = '' and l.slot = u.slot
    -- As for used_rates below: the scan covers the slots taken, not every slot of the queue (concurrency of them).
    and l.slot between (select min(c.limit_slot) from claimed c) and (select max(c.limit_slot) from claimed c)
  returning l.slot
), used as materialized (
  -- The rate rows the started jobs use: the first ones taken, by slot number.
  select array(select s.slot from rates s order by s.slot limit (select count(*) from claimed)) as slots
), used_rates as (
  -- The bounds make the scan of the rows to hash cover the rows used, not every rate row of the queue (rateLimit.max).
  update :PGONCE_SCHEMA.limit_rate_slots r set used_at = now()
  from unnest((select u.slots from used u)) as u(slot)
  where r.queue = $1 and r.group_id = '' and r.slot = u.slot
    and r.slot between (select u.slots[1] from used u) and (select u.slots[cardinality(u.slots)] from used u)
  returning r.slot
)
select x.*, (extract(epoch from c.run_at) * 1000000)::bigint::text as run_at_us, c.timeout_ms
from claimed c, lateral :PGONCE_SCHEMA._as_claimed(cast(row(c.*) as :PGONCE_SCHEMA.jobs)) x
order by x.priority, x.run_at_ms, x.id
