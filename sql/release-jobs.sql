-- Gives back active jobs ($1 ids, $2 lock tokens) without counting their run: due as before ($3 = 0) or
-- in $3 ms; a job whose cancellation was requested ends 'cancelled'. Wakes the queues' idle workers.
-- Each job is found by primary key: "state || ''" keeps any plan from driving the update from the jobs_leases index.
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md).
with released as (
  update :PGONCE_SCHEMA.jobs j
  set state = case when j.cancel_requested_at is not null then 'cancelled' when $3::bigint > 0 then 'delayed' else 'waiting' end,
      run_at = case when $3::bigint > 0 then now() + make_interval(secs => $3::bigint / 1000.0) else now() end,
      finished_at = case when j.cancel_requested_at is not null then now() end,
      attempts = j.attempts - 1,
      lock_token = null, locked_until = null, locked_by = null, started_at = null
  from unnest($1::bigint[], $2::uuid[]) as i(id, token)
  where j.id = i.id and :PGONCE_SCHEMA._holds_lease(j.state || '') and j.lock_token = i.token
    and :PGONCE_SCHEMA._keep_index(j.id)
  returning j.id, j.queue, j.state
)
select (select count(*) from released)::integer as count,
  (select count(*) from (select distinct queue from released where state <> 'cancelled') q
   where :PGONCE_SCHEMA._wake(q.queue))::integer as woken
