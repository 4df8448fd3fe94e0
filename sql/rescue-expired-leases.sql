-- Housekeeping: up to $1 active jobs whose lease expired go back to the queue (their attempt stays counted), or to
-- 'failed' when no attempt is left (releasing their no-TTL dedup key); wakes the workers of the queues concerned.
with expired as (
  select id from :PGONCE_SCHEMA.jobs
  where state = 'active' and locked_until < now()
  order by locked_until
  limit $1
  for update skip locked
), rescued as (
  update :PGONCE_SCHEMA.jobs j
  set state = case when j.attempts >= j.max_attempts then 'failed' else 'waiting' end,
      run_at = case when j.attempts >= j.max_attempts then j.run_at else now() end,
      finished_at = case when j.attempts >= j.max_attempts then now() end,
      last_error = 'lease expired: worker ' || coalesce(j.locked_by, '?') || ' stopped heartbeating (crashed, killed or blocked)',
      error_stack = null,
      lock_token = null, locked_until = null, locked_by = null
  from expired e
  where j.id = e.id and j.state = 'active' and j.locked_until < now()
  returning j.id, j.queue, j.state, j.dedup_key
), released as (
  delete from :PGONCE_SCHEMA.dedup_keys k using rescued r
  where r.state = 'failed' and k.queue = r.queue and k.key = r.dedup_key and k.job_id = r.id and k.expires_at is null
), woken as (
  select pg_notify(:PGONCE_CHANNEL, q.queue) from (select distinct queue from rescued where state = 'waiting') q
)
select (select count(*) from rescued)::integer as count, (select count(*) from woken)::integer as woken
