-- On close: jobs handed to worker $1 that it never started (lock tokens other than $2) go back to the queue, attempt not counted.
with released as (
  update :PGONCE_SCHEMA.jobs j
  set state = 'waiting', attempts = greatest(j.attempts - 1, 0),
      lock_token = null, locked_until = null, locked_by = null, started_at = null
  where j.locked_by = $1 and j.state = 'active' and j.lock_token <> all($2::uuid[])
  returning j.queue
), woken as (
  select pg_notify(:PGONCE_CHANNEL, q.queue) from (select distinct queue from released) q
)
select (select count(*) from released)::integer as count, (select count(*) from woken)::integer as woken
