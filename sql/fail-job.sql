-- Records a failed attempt of active job $1 (fenced by lock token $2) with error $3 and stack $4: back to the queue
-- after $5 ms while attempts remain, else 'failed' (kept for inspection, and for retryJob); 'cancelled' when its
-- cancellation was requested. The jobs_finished trigger does what follows a job's end.
-- The job is found by primary key: "state || ''" keeps any plan from driving the update from the jobs_leases index.
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md).
update :PGONCE_SCHEMA.jobs j
set state = case when j.cancel_requested_at is not null then 'cancelled'
                 when j.attempts >= j.max_attempts then 'failed'
                 when $5::bigint > 0 then 'delayed' else 'waiting' end,
    run_at = case when j.cancel_requested_at is not null or j.attempts >= j.max_attempts then j.run_at
                  else now() + make_interval(secs => $5::bigint / 1000.0) end,
    finished_at = case when j.cancel_requested_at is not null or j.attempts >= j.max_attempts then now() end,
    last_error = $3, error_stack = $4,
    locked_until = null
where j.id = $1 and j.state || '' = 'active' and j.lock_token = $2 and :PGONCE_SCHEMA._keep_index(j.id)
returning j.*, case when :PGONCE_SCHEMA._is_queued(j.state) then :PGONCE_SCHEMA._wake(j.queue) else false end as woken
