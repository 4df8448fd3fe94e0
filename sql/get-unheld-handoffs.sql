-- Jobs handed to worker $1 that it does not hold (lock tokens other than $2): a NOTIFY that died with a replaced LISTEN
-- connection, or one too large to carry the job. The worker runs them as if the NOTIFY had brought them.
select id, queue, name, job_id, data, priority, attempts, max_attempts, backoff, dedup_key, lock_token,
  last_error, error_stack,
  extract(epoch from run_at)::float8 * 1000 as run_at_ms,
  extract(epoch from created_at)::float8 * 1000 as created_at_ms
from :PGONCE_SCHEMA.jobs
where locked_by = $1 and state = 'active' and lock_token <> all($2::uuid[])
