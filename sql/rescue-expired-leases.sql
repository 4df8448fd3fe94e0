-- Housekeeping: up to $1 jobs whose lease expired (their worker crashed, was killed or stopped heartbeating) go back
-- to the queue: a claimed one as it was (its handler never started), an active one with its run counted, or to
-- 'failed' when no attempt is left; 'cancelled' when its cancellation was requested. Wakes the queues' idle workers.
with expired as (
  select id from :PGONCE_SCHEMA.jobs
  where :PGONCE_SCHEMA._holds_lease(state) and locked_until < now()
  order by locked_until
  limit $1
  for update skip locked
), rescued as (
  update :PGONCE_SCHEMA.jobs j
  set state = case when j.cancel_requested_at is not null then 'cancelled'
                   when j.state = 'active' and j.attempts >= j.max_attempts then 'failed' else 'waiting' end,
      run_at = case when j.cancel_requested_at is null and not (j.state = 'active' and j.attempts >= j.max_attempts)
                    then now() else j.run_at end,
      finished_at = case when j.cancel_requested_at is not null or (j.state = 'active' and j.attempts >= j.max_attempts)
                         then now() end,
      last_error = case when j.state = 'active'
        then 'lease expired: worker ' || coalesce(j.locked_by, '?') || ' stopped heartbeating (crashed, killed or blocked)'
        else j.last_error end,
      error_stack = case when j.state = 'active' then null else j.error_stack end,
      lock_token = null, locked_until = null, locked_by = null
  from expired e
  where j.id = e.id and :PGONCE_SCHEMA._holds_lease(j.state) and j.locked_until < now()
  returning j.id, j.queue, j.state
)
select (select count(*) from rescued)::integer as count,
  (select count(*) from (select distinct queue from rescued where state = 'waiting') q
   where :PGONCE_SCHEMA._wake(q.queue))::integer as woken
