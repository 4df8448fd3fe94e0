-- Records a failed attempt of active job $1 (fenced by lock token $2) with error $3 and stack $4: back to the queue
-- after $5 ms while attempts remain, else 'failed' (kept for inspection), releasing its no-TTL dedup key if it still owns it.
-- $6 is always 'active': a parameter, so that a generic plan looks the job up by primary key, not through jobs_leases.
with failed as (
  update :PGONCE_SCHEMA.jobs j
  set state = case when j.attempts >= j.max_attempts then 'failed'
                   when $5::bigint > 0 then 'delayed' else 'waiting' end,
      run_at = case when j.attempts >= j.max_attempts then j.run_at
                    else now() + make_interval(secs => $5::bigint / 1000.0) end,
      finished_at = case when j.attempts >= j.max_attempts then now() end,
      last_error = $3, error_stack = $4,
      lock_token = null, locked_until = null, locked_by = null
  where j.id = $1 and j.state = $6::text and j.lock_token = $2
  returning j.*
), released as (
  delete from :PGONCE_SCHEMA.dedup_keys k using failed f
  where f.state = 'failed' and k.queue = f.queue and k.key = f.dedup_key and k.job_id = f.id and k.expires_at is null
)
select * from failed
