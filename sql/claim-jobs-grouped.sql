-- sql/claim-jobs-limited.sql for a queue with group limits (or a group held by ctx.rateLimit), same parameters and
-- answer, the same start of a job and the same queue-wide reservations (keep the three alike); a statement of its own
-- so that other queues pay nothing for groups (docs/flow-control.md, "Groups").
-- Which jobs: a walk over the groups with queued jobs (one descent of jobs_group_due each) in group id order, from
-- after the group this worker's previous claim served last ($10; '' at first) round to it again, that stops once it
-- has as many groups with a due job and room (free slot numbers, unused rate rows, by this statement's snapshot) as the
-- claim has room for; each such group's next jobs in the queue's order, as many as its room allows; and the jobs
-- without a group among the first 1,000 due jobs after the worker's cursor. Then round robin: every group's first job,
-- then every group's second, ..., within a round the groups in the walk's order, the jobs without a group counted as
-- one group that comes first; at most as many as the queue-wide reservations allow. The answer's group_cursor is the
-- worker's next $10: the last group in the walk's order that this claim served.
-- Those are locked FOR UPDATE SKIP LOCKED (a job another claim took meanwhile is skipped). A job of a group starts only
-- if this statement takes, in its own writes, its group's reservations: a rate row (limit_rate_slots, upserted only if
-- missing or last used at least durationMs ago on its newest version) and then a slot (limit_slots, upserted with the
-- job's id and token only if missing or free on its newest version; the primary key admits one row per slot number
-- 1..group.concurrency). The snapshot only proposes: what is taken is decided by the writes, so a group's limit holds
-- whatever concurrent claims do. Rows are written in (group, slot) order, the same in every claim, so that two claims
-- waiting on each other's uncommitted rows never deadlock.
-- The fetch cursor ($6-$8) is used for the jobs without a group only: the groups' jobs are taken from each group's
-- head (jobs_group_due).
with recursive settings as materialized (
  select s.concurrency, s.rate_max, s.rate_duration_ms, s.group_concurrency, s.group_rate_max,
    make_interval(secs => s.group_rate_duration_ms / 1000.0) as group_window,
    s.paused or coalesce(s.rate_paused_until > now(), false) as held
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
  limit (select case when s.concurrency is null then $2::bigint else least($2::bigint, (select count(*) from slots)) end
         from settings s)
  for update skip locked
), room as materialized (
  select case when coalesce(s.held, false) then 0 else least($2::bigint,
      case when s.concurrency is null then $2::bigint else (select count(*) from slots) end,
      case when s.rate_max is null then $2::bigint else (select count(*) from rates) end) end as n
  from settings s
), after(group_id, ctid, priority, run_at, id, n) as (
  -- The walk over the groups with queued jobs, each with its first queued job in the queue's order (its head): a loose
  -- scan of jobs_group_due, one descent per group, in group id order from after this worker's cursor ($10, the last
  -- group its previous claim served) to the end ...
  (select j.group_id, j.ctid, j.priority, j.run_at, j.id, 1 from :PGONCE_SCHEMA.jobs j
   where j.queue = $1 and j.group_id is not null and j.group_id > $10 and :PGONCE_SCHEMA._is_queued(j.state)
     and (select n from room) > 0
   order by j.group_id, j.priority, j.run_at, j.id limit 1)
  union all
  select h.*, g.n + 1 from after g cross join lateral (
    select j.group_id, j.ctid, j.priority, j.run_at, j.id from :PGONCE_SCHEMA.jobs j
    where j.queue = $1 and j.group_id is not null and j.group_id > g.group_id and :PGONCE_SCHEMA._is_queued(j.state)
    order by j.group_id, j.priority, j.run_at, j.id limit 1) h
), before(group_id, ctid, priority, run_at, id, n) as (
  -- ... then from the first group up to the cursor (round robin). Read only as far as the claim needs (open's limit).
  (select j.group_id, j.ctid, j.priority, j.run_at, j.id, 1000000000 from :PGONCE_SCHEMA.jobs j
   where j.queue = $1 and j.group_id is not null and j.group_id <= $10 and :PGONCE_SCHEMA._is_queued(j.state)
     and (select n from room) > 0
   order by j.group_id, j.priority, j.run_at, j.id limit 1)
  union all
  select h.*, g.n + 1 from before g cross join lateral (
    select j.group_id, j.ctid, j.priority, j.run_at, j.id from :PGONCE_SCHEMA.jobs j
    where j.queue = $1 and j.group_id is not null and j.group_id > g.group_id and j.group_id <= $10
      and :PGONCE_SCHEMA._is_queued(j.state)
    order by j.group_id, j.priority, j.run_at, j.id limit 1) h
), paused as materialized (
  -- The groups a handler's ctx.rateLimit holds now.
  select p.group_id from :PGONCE_SCHEMA.limit_groups p where p.queue = $1 and p.paused_until > now()
), open as materialized (
  -- The walk's groups with a due job and room by this snapshot (the writes below re-check it): the slot numbers free
  -- in it and how many jobs it may start (k); as many groups as the claim has room for, then the walk stops.
  select w.group_id, w.ctid, w.priority, w.run_at, w.id, w.n, r.k, case when st.group_concurrency is not null then
      array(select f.slot from generate_series(1, st.group_concurrency) f(slot) where f.slot <> all(s.held) limit r.k)
    end as free
  from (select * from after union all select * from before) w
  cross join settings st
  cross join lateral (
    -- The group's slots held by this snapshot: one read of its slot rows.
    select coalesce(array_agg(l.slot) filter (where l.job_id is not null and l.slot <= st.group_concurrency), '{}')
      as held
    from :PGONCE_SCHEMA.limit_slots l
    where st.group_concurrency is not null and l.queue = $1 and l.group_id = w.group_id) s
  cross join lateral (
    select least((select n from room),
      case when st.group_concurrency is null then (select n from room)
        else st.group_concurrency - cardinality(s.held) end,
      case when st.group_rate_max is null then (select n from room) else st.group_rate_max - (
        select count(*) from :PGONCE_SCHEMA.limit_rate_slots r
        where r.queue = $1 and r.group_id = w.group_id and r.slot <= st.group_rate_max
          and r.used_at > now() - st.group_window) end) as k) r
  where r.k > 0 and w.group_id not in (select p.group_id from paused p)
    and (w.run_at <= now() or exists (
      select 1 from :PGONCE_SCHEMA.jobs j
      where j.queue = $1 and j.group_id = w.group_id and :PGONCE_SCHEMA._is_queued(j.state) and j.run_at <= now()))
  limit (select n from room)
), fair as materialized (
  -- No group needs more candidates than twice its share of the room (a group with few jobs leaves room unused for
  -- this claim, not for the next).
  select greatest(1, 2 * ceil((select n from room)::numeric / greatest(1, count(*))))::bigint as share from open o
), cand as materialized (
  -- A group's head when due (most groups need no more), its next jobs after it when it has room for more, and all of
  -- its first due jobs when its head is not due.
  select o.group_id, o.n, o.ctid, o.priority, o.run_at, o.id, 1::bigint as rn
  from open o where o.run_at <= now()
  union all
  select o.group_id, o.n, j.ctid, j.priority, j.run_at, j.id,
    1 + row_number() over (partition by o.group_id order by j.priority, j.run_at, j.id)
  from open o cross join lateral (
    select j.ctid, j.priority, j.run_at, j.id from :PGONCE_SCHEMA.jobs j
    where j.queue = $1 and j.group_id = o.group_id and :PGONCE_SCHEMA._is_queued(j.state) and j.run_at <= now()
      and (j.priority, j.run_at, j.id) > (o.priority, o.run_at, o.id)
    order by j.priority, j.run_at, j.id
    limit least(o.k, (select f.share from fair f)) - 1) j
  where o.k > 1 and o.run_at <= now() and (select f.share from fair f) > 1
  union all
  select o.group_id, o.n, j.ctid, j.priority, j.run_at, j.id,
    row_number() over (partition by o.group_id order by j.priority, j.run_at, j.id)
  from open o cross join lateral (
    select j.ctid, j.priority, j.run_at, j.id from :PGONCE_SCHEMA.jobs j
    where j.queue = $1 and j.group_id = o.group_id and :PGONCE_SCHEMA._is_queued(j.state) and j.run_at <= now()
    order by j.priority, j.run_at, j.id
    limit least(o.k, (select f.share from fair f))) j
  where o.run_at > now()
  union all
  select null, 0, u.ctid, u.priority, u.run_at, u.id,
    row_number() over (order by u.priority, u.run_at, u.id)
  from (
    -- After the worker's cursor, as sql/claim-jobs.sql: not walking the index entries of the jobs claimed before it.
    select j.ctid, j.priority, j.run_at, j.id, j.group_id from :PGONCE_SCHEMA.jobs j
    where j.queue = $1 and :PGONCE_SCHEMA._is_queued(j.state) and j.run_at <= now() and (select n from room) > 0
      and (j.priority, j.run_at, j.id)
        > ($6::integer, timestamptz 'epoch' + $7::bigint * interval '1 microsecond', $8::bigint)
    order by j.priority, j.run_at, j.id
    limit 1000) u
  where u.group_id is null
), taken as materialized (
  select j.ctid, j.id, j.group_id, j.priority, j.run_at
  from :PGONCE_SCHEMA.jobs j
  where j.ctid = any(array(
      select c.ctid from cand c order by c.rn, c.n, c.priority, c.run_at, c.id limit (select n from room)))
    and j.queue = $1 and :PGONCE_SCHEMA._is_queued(j.state) and j.run_at <= now()
  for update skip locked
), locked as materialized (
  -- gi: a job's rank among the jobs of its group locked here.
  select t.*, row_number() over (partition by t.group_id order by t.priority, t.run_at, t.id) as gi from taken t
), wanted as materialized (
  select l.group_id, count(*) as want from locked l where l.group_id is not null group by l.group_id
), rate_try as materialized (
  -- Each group's rate rows to take: numbers unused by the snapshot, as many as it has jobs to start.
  select w.group_id, t.slot
  from wanted w cross join settings st cross join lateral (
    select s.slot from generate_series(1, st.group_rate_max) s(slot)
    where not exists (
      select 1 from :PGONCE_SCHEMA.limit_rate_slots r
      where r.queue = $1 and r.group_id = w.group_id and r.slot = s.slot and r.used_at > now() - st.group_window)
    limit w.want) t
  where st.group_rate_max is not null
), rated as (
  -- A rate row is taken if missing, or last used at least durationMs ago on its newest version.
  insert into :PGONCE_SCHEMA.limit_rate_slots as r (queue, group_id, slot, used_at)
  select $1, t.group_id, t.slot, now() from rate_try t order by t.group_id, t.slot
  on conflict (queue, group_id, slot) do update set used_at = excluded.used_at
    where r.used_at <= now() - (select st.group_window from settings st)
  returning r.group_id
), rate_room as materialized (
  select r.group_id, count(*) as n from rated r group by r.group_id
), rate_ok as materialized (
  -- The jobs of groups whose rate allows them: the first ones, as many as rate rows were taken.
  select l.id, l.group_id, l.gi from locked l cross join settings st
  where l.group_id is not null
    and (st.group_rate_max is null or l.gi <= coalesce((select n from rate_room r where r.group_id = l.group_id), 0))
), group_slots as (
  -- A slot is taken if missing, or free (job_id null) on its newest version.
  insert into :PGONCE_SCHEMA.limit_slots as l (queue, group_id, slot, job_id, lock_token, taken_at)
  select $1, o.group_id, t.slot, o.id,
    ($5::text || overlay(lpad(to_hex(o.id), 16, '0') placing '-' from 5 for 0))::uuid, now()
  from rate_ok o join open g on g.group_id = o.group_id cross join lateral (select g.free[o.gi] as slot) t
  where t.slot is not null
  order by o.group_id, t.slot
  on conflict (queue, group_id, slot) do update
    set job_id = excluded.job_id, lock_token = excluded.lock_token, taken_at = excluded.taken_at
    where l.job_id is null
  returning l.job_id, l.slot
), started as materialized (
  select l.ctid, g.slot as group_slot, row_number() over (order by l.priority, l.run_at, l.id) as qi
  from locked l cross join settings st left join group_slots g on g.job_id = l.id
  where l.group_id is null
     or (st.group_concurrency is not null and g.slot is not null)
     or (st.group_concurrency is null and l.id in (select o.id from rate_ok o))
), assigned as materialized (
  -- The i-th job started (the queue's order) takes the i-th queue-wide slot locked, as in claim-jobs-limited.sql.
  select s.ctid, s.group_slot, f.slot
  from started s left join (select s.slot, row_number() over (order by s.slot) as rn from slots s) f on f.rn = s.qi
), claimed as (
  update :PGONCE_SCHEMA.jobs j
  set state = 'active', attempts = j.attempts + 1, started_at = now(),
      lock_token = ($5::text || overlay(lpad(to_hex(j.id), 16, '0') placing '-' from 5 for 0))::uuid,
      timeout_at = now() + make_interval(secs => coalesce(j.timeout_ms, $9::integer) / 1000.0),
      locked_until = least(now() + make_interval(secs => $3::bigint / 1000.0),
        now() + make_interval(secs => coalesce(j.timeout_ms, $9::integer) / 1000.0)),
      locked_by = $4, limit_slot = u.slot, group_slot = u.group_slot
  from unnest((select array_agg(a.ctid) from assigned a), (select array_agg(a.slot) from assigned a),
              (select array_agg(a.group_slot) from assigned a)) as u(ctid, slot, group_slot)
  where j.ctid = u.ctid and set_config('synchronous_commit', 'off', true) is not null
  returning j.*
), taken_slots as (
  update :PGONCE_SCHEMA.limit_slots l set job_id = u.id, lock_token = u.lock_token
  from unnest((select array_agg(c.limit_slot) from claimed c where c.limit_slot is not null),
              (select array_agg(c.id) from claimed c where c.limit_slot is not null),
              (select array_agg(c.lock_token) from claimed c where c.limit_slot is not null)) as u(slot, id, lock_token)
  where l.queue = $1 and l.group_id = '' and l.slot = u.slot
    and l.slot between (select min(c.limit_slot) from claimed c) and (select max(c.limit_slot) from claimed c)
  returning l.slot
), used as materialized (
  select array(select s.slot from rates s order by s.slot limit (select count(*) from claimed)) as slots
), used_rates as (
  update :PGONCE_SCHEMA.limit_rate_slots r set used_at = now()
  from unnest((select u.slots from used u)) as u(slot)
  where r.queue = $1 and r.group_id = '' and r.slot = u.slot
    and r.slot between (select u.slots[1] from used u) and (select u.slots[cardinality(u.slots)] from used u)
  returning r.slot
)
select x.*, (extract(epoch from c.run_at) * 1000000)::bigint::text as run_at_us, c.timeout_ms,
  -- The worker's next cursor ($10): the last group in the walk's order that this claim served.
  (select o.group_id from open o where o.group_id in (select d.group_id from claimed d) order by o.n desc limit 1)
    as group_cursor
from claimed c, lateral :PGONCE_SCHEMA._as_claimed(cast(row(c.*) as :PGONCE_SCHEMA.jobs)) x
order by x.priority, x.run_at_ms, x.id
