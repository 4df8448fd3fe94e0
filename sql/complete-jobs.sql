-- Completes jobs whose handlers returned ($1 ids, $2 lock tokens, $3 results as JSON text), fenced by state and lock
-- token: 'completed', or 'cancelled' when cancellation was requested meanwhile. One row per job changed; a job missing
-- from the answer lost its lease, or ran past its timeout_at: a completion after the deadline is refused whatever the
-- worker believes (a frozen or busy process), as a lost lease's is. The row keeps the run's token
-- (sql/outcome-recorded.sql); what follows a job's end (its no-TTL key released, its dependents promoted or failed) is
-- the jobs_finished trigger's. Each job is found by
-- primary key: "state || ''" keeps any plan from driving the update from the jobs_leases partial index, whose row
-- estimate (the leases at the last ANALYZE) is often far too small. A plain statement rather than a plpgsql function:
-- the function's RETURN QUERY cost ~1.2-2 µs a job of server time (bench/DECISIONS.md, "Statement and schema forms").
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md).
-- A run that took a concurrency slot (flow control, jobs.limit_slot > 0) has it freed here, all in one update by
-- primary key, fenced by the run's token as jobs_slot_released would: limit_slot becomes -limit_slot ("freed by its
-- completion"), which keeps that trigger's WHEN false, so a completion calls no trigger function per job (a plpgsql
-- call per row was most of the cost of a concurrency limit that never binds: docs/flow-control.md, "What it costs").
-- A run holding a group's slot (group_slot > 0) has it freed in the same update (group_slot negated).
with done as (
  update :PGONCE_SCHEMA.jobs j
  set state = case when j.cancel_requested_at is null then 'completed' else 'cancelled' end,
      result = i.result::jsonb, finished_at = now(), locked_until = null, limit_slot = -j.limit_slot,
      group_slot = -j.group_slot
  from unnest($1::bigint[], $2::uuid[], $3::text[]) as i(id, token, result)
  where j.id = i.id and j.state || '' = 'active' and j.lock_token = i.token
    and (j.timeout_at is null or now() < j.timeout_at) and :PGONCE_SCHEMA._keep_index(j.id)
  returning j.id, j.queue, j.lock_token as token, j.state, j.attempts, -j.limit_slot as slot, j.group_id,
    -j.group_slot as group_slot
), held as materialized (
  -- The slots to free: each run's queue-wide slot and its group's.
  select d.queue::text as queue, '' as group_id, d.slot, d.id, d.token from done d where d.slot > 0
  union all
  select d.queue::text, d.group_id, d.group_slot, d.id, d.token from done d where d.group_slot > 0
), freed as (
  -- Driven by the unnested rows, each slot found by primary key (as the claims take them).
  update :PGONCE_SCHEMA.limit_slots l set job_id = null, lock_token = null
  from unnest((select array_agg(h.queue) from held h), (select array_agg(h.group_id) from held h),
              (select array_agg(h.slot) from held h), (select array_agg(h.id) from held h),
              (select array_agg(h.token) from held h)) as f(queue, group_id, slot, id, token)
  where (l.queue, l.group_id, l.slot) = (f.queue, f.group_id, f.slot) and l.job_id = f.id and l.lock_token = f.token
)
select d.token, d.state, d.attempts from done d
