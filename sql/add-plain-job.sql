-- queue.add of a plain job (no jobId, dedup key or dependency: nothing to decide): the INSERT of _insert_jobs() for
-- one row, with the same rules (_new_job_state, _due_at, _job_defaults), answered in _answer()'s shape, and the wake-up
-- rule as add_job() applies it (only a job that is due now wakes an idle worker). Without add_job()'s and
-- _insert_jobs()' plpgsql layers and arrays: 1.25-1.45x the adds per second from 16 connections (bench/README.md,
-- "Plain adds"). $1 queue, $2 name, $3 data (JSON text), $4 delay ms, $5 priority, $6 max attempts, $7 backoff (JSON
-- text), $8 trace context.
with ins as (
  insert into :PGONCE_SCHEMA.jobs as j (id, queue, name, data, state, run_at, priority, max_attempts, backoff, trace_context)
  select nextval(':PGONCE_SCHEMA.job_ids'), $1, $2, coalesce($3::jsonb, '{}'::jsonb),
    :PGONCE_SCHEMA._new_job_state(false, $4::bigint), :PGONCE_SCHEMA._due_at($4::bigint),
    coalesce($5::integer, d.priority), coalesce($6::integer, d.max_attempts), $7::jsonb, $8
  from :PGONCE_SCHEMA._job_defaults() d
  returning j
)
select x.*, case when :PGONCE_SCHEMA._is_queued((ins.j).state) then :PGONCE_SCHEMA._wake($1) end as woken
from ins, lateral :PGONCE_SCHEMA._answer(cast(row(1, 'added', null, ins.j) as :PGONCE_SCHEMA.admission)) x
