-- queue.add of a plain job (no jobId, dedup key or dependency: nothing to decide): _admit_one()'s one-row INSERT for
-- a plain job, with the same rules (_new_job_state, _due_at, the scalar defaults), answered in _answer()'s shape (three
-- columns: no ordinal, no NOTIFY result). Kept beside add_job() because it skips its plpgsql layers (W2 1.34x,
-- bench/DECISIONS.md#plain-add). The idle slots are probed once (_idle_worker_waits, inlined) and _wake() is called only
-- when a worker sleeps. $1 queue, $2 name, $3 data (JSON text), $4 delay ms, $5 priority, $6 max attempts, $7 backoff
-- (JSON text), $8 trace context, $9 timeout ms, $10 group id (null: none).
with ins as (
  insert into :PGONCE_SCHEMA.jobs as j (id, queue, name, data, state, run_at, priority, max_attempts, backoff, trace_context,
    timeout_ms, group_id)
  values (nextval(':PGONCE_SCHEMA.job_ids'), $1, $2, coalesce($3::jsonb, '{}'::jsonb),
    :PGONCE_SCHEMA._new_job_state(false, $4::bigint), :PGONCE_SCHEMA._due_at($4::bigint),
    coalesce($5::integer, :PGONCE_SCHEMA._default_priority()), coalesce($6::integer, :PGONCE_SCHEMA._default_max_attempts()),
    $7::jsonb, $8, $9::integer, $10::text)
  returning j
), woken as materialized (
  -- Scanned below for its side effect only (the wake-up's NOTIFY), not sent back.
  select case when :PGONCE_SCHEMA._is_queued((ins.j).state) and :PGONCE_SCHEMA._idle_worker_waits($1)
              then :PGONCE_SCHEMA._wake($1) end as woken
  from ins
)
select x.outcome, x.error, x.job
from ins cross join woken, lateral :PGONCE_SCHEMA._answer(cast(row(1, 'added', null, ins.j) as :PGONCE_SCHEMA.admission)) x
