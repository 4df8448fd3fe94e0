-- A job handed to this worker whose NOTIFY payload was too large to carry it: job $1 if it is still active under lock token $2.
select id, queue, name, job_id, data, priority, attempts, max_attempts, backoff, dedup_key, lock_token,
  last_error, error_stack,
  extract(epoch from run_at)::float8 * 1000 as run_at_ms,
  extract(epoch from created_at)::float8 * 1000 as created_at_ms
from :PGONCE_SCHEMA.jobs
where id = $1 and lock_token = $2::uuid and state = 'active'
