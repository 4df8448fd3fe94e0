-- Gives back what a claim of worker $2 on queue $1 took when its answer was lost (the connection dropped while it was
-- in flight): the jobs still active under a lock token the worker chose for that claim (first 8 bytes $3,
-- 'xxxxxxxx-xxxx-xxxx-'; see sql/claim-jobs.sql), their run not counted, due as before. A claim that never committed
-- took nothing, and this changes nothing. Wakes the queue's idle workers. Found through jobs_leases (the held jobs);
-- _keep_index() keeps that index whatever the statistics were when a session planned this (docs/architecture.md).
with released as (
  update :PGONCE_SCHEMA.jobs j
  set state = case when j.cancel_requested_at is not null then 'cancelled' else 'waiting' end,
      finished_at = case when j.cancel_requested_at is not null then now() end,
      attempts = j.attempts - 1,
      lock_token = null, locked_until = null, locked_by = null, started_at = null
  where :PGONCE_SCHEMA._holds_lease(j.state) and j.queue = $1 and j.locked_by = $2
    and j.lock_token between ($3::text || '0000-000000000000')::uuid and ($3::text || 'ffff-ffffffffffff')::uuid
    and :PGONCE_SCHEMA._keep_index(j.id)
  returning j.state
)
select (select count(*) from released)::integer as count,
  exists (select 1 from released where state = 'waiting') and :PGONCE_SCHEMA._wake($1) as woken
