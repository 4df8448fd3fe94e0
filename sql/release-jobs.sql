-- Returns active jobs ($1 ids, $2 lock tokens) to the queue without counting their attempt: due as before ($3 = 0) or in $3 ms; wakes the queues' workers.
-- $4 is always 'active': a parameter, so that a generic plan cannot drive the update from the jobs_leases partial
-- index (estimated at one row, it made a nested loop over every active lease for each input row).
with released as (
  update :PGONCE_SCHEMA.jobs j
  set state = case when $3::bigint > 0 then 'delayed' else 'waiting' end,
      run_at = case when $3::bigint > 0 then now() + make_interval(secs => $3::bigint / 1000.0) else j.run_at end,
      attempts = greatest(j.attempts - 1, 0),
      lock_token = null, locked_until = null, locked_by = null, started_at = null
  from unnest($1::bigint[], $2::uuid[]) as i(id, token)
  where j.id = i.id and j.state = $4::text and j.lock_token = i.token
  returning j.id, j.queue
), woken as (
  select pg_notify(:PGONCE_CHANNEL, q.queue) from (select distinct queue from released) q
)
select (select count(*) from released)::integer as count, (select count(*) from woken)::integer as woken
