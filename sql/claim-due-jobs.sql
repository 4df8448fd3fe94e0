-- Claims up to $2 due jobs of queue $1 (by priority, run_at, id) for worker $4: active, a fresh lock token, a lease of $3 ms, the attempt counted.
-- The worker's earlier idle sign-ups are withdrawn; when nothing was claimed and $5 (the advisory-lock key its LISTEN
-- session holds) is given, it signs up again for $6 ms, so that add_job() can hand it the next job directly.
-- Committed without waiting for the WAL flush (synchronous_commit off for this transaction only): a claim lost in a
-- server crash leaves the job waiting, as if the worker had died before claiming; outcomes are still flushed.
-- Lock tokens: one random uuid per claim statement gives the first 8 bytes, the job id the last 8 (unique per job and
-- claim, which is all the fence needs; gen_random_uuid() per row cost 1 µs of a ~8 µs row). The rows are updated
-- through the ctids their lock returned (a TID scan, not a second index descent per row); a row whose locked version is
-- newer than this statement's snapshot is not updated, and stays waiting for the next claim.
with claimed as (
  update :PGONCE_SCHEMA.jobs j
  set state = 'active',
      lock_token = ((select left(gen_random_uuid()::text, 19)) || overlay(lpad(to_hex(j.id), 16, '0') placing '-' from 5 for 0))::uuid,
      locked_until = now() + make_interval(secs => $3::bigint / 1000.0),
      locked_by = $4, attempts = j.attempts + 1, started_at = now()
  where set_config('synchronous_commit', 'off', true) is not null
    and j.ctid = any(array(
      select ctid from :PGONCE_SCHEMA.jobs
      where queue = $1 and state in ('waiting', 'delayed') and run_at <= now()
      order by priority, run_at, id
      limit $2
      for update skip locked))
  returning j.id, j.queue, j.name, j.job_id, j.data, j.priority, j.attempts, j.max_attempts, j.backoff,
    j.dedup_key, j.lock_token, j.last_error, j.error_stack, j.run_at, j.created_at
), withdrawn as (
  -- A sign-up an add is taking right now is locked: skipped here, consumed by that add.
  delete from :PGONCE_SCHEMA.idle_workers r
  where r.id = any(array(
    select id from :PGONCE_SCHEMA.idle_workers
    where queue = $1 and worker_id = $4
    for update skip locked))
), signed_up as (
  insert into :PGONCE_SCHEMA.idle_workers (queue, worker_id, alive_key, lease_ms, expires_at)
  select $1, $4, $5::bigint, $3::bigint, now() + make_interval(secs => $6::bigint / 1000.0)
  where $5::bigint is not null and not exists (select 1 from claimed)
    and set_config('synchronous_commit', 'off', true) is not null
)
select id, queue, name, job_id, data, priority, attempts, max_attempts, backoff, dedup_key, lock_token,
  last_error, error_stack,
  extract(epoch from run_at)::float8 * 1000 as run_at_ms,
  extract(epoch from created_at)::float8 * 1000 as created_at_ms
from claimed
order by priority, run_at, id
