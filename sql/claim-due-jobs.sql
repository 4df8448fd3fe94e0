-- Claims up to $2 due jobs of queue $1 (by priority, run_at, id) for worker $4: active, a fresh lock token, a lease of $3 ms, the attempt counted.
with claimed as (
  update :PGONCE_SCHEMA.jobs j
  set state = 'active', lock_token = gen_random_uuid(),
      locked_until = now() + make_interval(secs => $3::bigint / 1000.0),
      locked_by = $4, attempts = j.attempts + 1, started_at = now()
  where j.id = any(array(
    select id from :PGONCE_SCHEMA.jobs
    where queue = $1 and state in ('waiting', 'delayed') and run_at <= now()
    order by priority, run_at, id
    limit $2
    for update skip locked))
  returning j.id, j.queue, j.name, j.job_id, j.data, j.priority, j.attempts, j.max_attempts, j.backoff,
    j.dedup_key, j.lock_token, j.last_error, j.error_stack, j.run_at, j.created_at
)
select id, queue, name, job_id, data, priority, attempts, max_attempts, backoff, dedup_key, lock_token,
  last_error, error_stack,
  extract(epoch from run_at)::float8 * 1000 as run_at_ms,
  extract(epoch from created_at)::float8 * 1000 as created_at_ms
from claimed
order by priority, run_at, id
