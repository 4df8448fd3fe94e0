-- queue.add of a plain job (no jobId, dedup key or dependency: nothing to decide): the INSERT of _insert_jobs() for
-- one row, with the same rules (_new_job_state, _due_at, the scalar defaults), answered in _answer()'s shape (three
-- columns: no ordinal, no NOTIFY result). Kept beside add_job() because it skips its plpgsql layers and arrays
-- (W2 1.34x, bench/README.md "Won back"). The idle slots are probed once (_idle_worker_waits); the hand-off
-- (_hand_off_target, 000008) and the wake-up (_wake, for a job due now) are asked only when a worker sleeps (~1.18x
-- server-side, bench/README.md "Plain adds against 4a0a88e"). $1 queue, $2 name, $3 data (JSON text), $4 delay ms,
-- $5 priority, $6 max attempts, $7 backoff (JSON text), $8 trace context, $9 whether it may hand off (its own
-- transaction). Handed off, the job goes in active for that worker, as a claim leaves it, and _hand_off() sends it.
with idle as materialized (
  select :PGONCE_SCHEMA._idle_worker_waits($1) as waits
), target as (
  -- offset 0 keeps the subquery whole: pulled up, its filter became a join filter and the function ran anyway.
  select t.* from idle left join lateral (
    select * from :PGONCE_SCHEMA._hand_off_target($1, $9::boolean, $4::bigint, $3, $7, $8) where idle.waits offset 0) t on true
), ins as (
  insert into :PGONCE_SCHEMA.jobs as j (id, queue, name, data, state, run_at, priority, max_attempts, backoff, trace_context,
    attempts, lock_token, locked_until, locked_by, started_at)
  select nextval(':PGONCE_SCHEMA.job_ids'), $1, $2, coalesce($3::jsonb, '{}'::jsonb),
    case when t.worker_id is null then :PGONCE_SCHEMA._new_job_state(false, $4::bigint) else 'active' end,
    :PGONCE_SCHEMA._due_at($4::bigint),
    coalesce($5::integer, :PGONCE_SCHEMA._default_priority()), coalesce($6::integer, :PGONCE_SCHEMA._default_max_attempts()),
    $7::jsonb, $8,
    case when t.worker_id is null then 0 else 1 end,
    case when t.worker_id is not null then gen_random_uuid() end,
    clock_timestamp() + make_interval(secs => t.lease_ms / 1000.0),
    t.worker_id,
    case when t.worker_id is not null then now() end
  from target t
  returning j
), woken as materialized (
  -- Scanned below for its side effects only (the hand-off's or the wake-up's NOTIFY), not sent back.
  select case when (ins.j).locked_by is not null then :PGONCE_SCHEMA._hand_off(ins.j, t.worker_id, t.backend_pid)
              when i.waits and :PGONCE_SCHEMA._is_queued((ins.j).state) then :PGONCE_SCHEMA._wake($1) end as woken
  from ins cross join target t cross join idle i
)
select x.outcome, x.error, x.job
from ins cross join woken, lateral :PGONCE_SCHEMA._answer(cast(row(1, 'added', null, ins.j) as :PGONCE_SCHEMA.admission)) x
