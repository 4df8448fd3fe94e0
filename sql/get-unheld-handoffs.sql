-- After its LISTEN connection was replaced: jobs handed to worker $1 whose NOTIFY it may have missed (active under
-- its name, with lock tokens other than $2, the ones it holds). The worker runs them as if the NOTIFY had arrived.
select id, queue, name, job_id, data, priority, attempts, max_attempts, backoff, dedup_key, lock_token,
  last_error, error_stack,
  extract(epoch from run_at)::float8 * 1000 as run_at_ms,
  extract(epoch from created_at)::float8 * 1000 as created_at_ms
from :PGONCE_SCHEMA.jobs
where locked_by = $1 and state = 'active' and lock_token <> all($2::uuid[])
