-- Housekeeping: up to $1 jobs whose lease expired (their worker crashed, was killed or stopped heartbeating) go back
-- to 'waiting' with their run counted and their stall counted. A job whose cancellation was requested ends 'cancelled'.
-- An active job whose attempts are used up still runs again once (stalls 0 -> 1: a crash of the worker is not the
-- job's failure); a second expired lease with no attempt left fails it ('failed'), so that a job that kills its
-- worker cannot loop. A run past its timeout_at (its worker did not record the timeout: blocked, frozen or gone) is a
-- failed attempt instead, as the worker would have recorded it: 'failed' once its attempts are used up, no grace run
-- (docs/workers.md#timeouts). Wakes the queues' idle workers.
with expired as (
  select id from :PGONCE_SCHEMA.jobs
  where :PGONCE_SCHEMA._holds_lease(state) and locked_until < now()
  order by locked_until
  limit $1
  for update skip locked
), decided as (
  select j.id, case
      when j.cancel_requested_at is not null then 'cancelled'
      when j.state = 'active' and j.attempts >= j.max_attempts
        and (j.stalls >= 1 or j.timeout_at <= now()) then 'failed'
      else 'waiting' end as next,
    j.state = 'active' and j.timeout_at <= now() as timed_out
  from :PGONCE_SCHEMA.jobs j join expired e on e.id = j.id
), rescued as (
  update :PGONCE_SCHEMA.jobs j
  set state = d.next,
      run_at = case when d.next = 'waiting' then now() else j.run_at end,
      finished_at = case when d.next = 'waiting' then null else now() end,
      stalls = j.stalls + case when j.state = 'active' then 1 else 0 end,
      last_error = case when d.timed_out
        then 'pgonce: job ' || j.id || ' timed out after ' || round(extract(epoch from j.timeout_at - j.started_at) * 1000)
          || ' ms (worker ' || coalesce(j.locked_by, '?') || ' did not record it: blocked, frozen or gone)'
        when j.state = 'active'
        then 'lease expired: worker ' || coalesce(j.locked_by, '?') || ' stopped heartbeating (crashed, killed or blocked)'
        else j.last_error end,
      error_stack = case when j.state = 'active' then null else j.error_stack end,
      lock_token = null, locked_until = null, locked_by = null
  from decided d
  where j.id = d.id and :PGONCE_SCHEMA._holds_lease(j.state) and j.locked_until < now()
  returning j.id, j.queue, j.state
)
select (select count(*) from rescued)::integer as count,
  (select count(*) from (select distinct queue from rescued where state = 'waiting') q
   where :PGONCE_SCHEMA._wake(q.queue))::integer as woken
