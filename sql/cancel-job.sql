-- Cancels job $2 of queue $1: a pending one (waiting, delayed, waiting-children) becomes 'cancelled' at once; a
-- running one is asked to stop (cancel_requested_at; its worker aborts ctx.signal at its next heartbeat, or at once on
-- the NOTIFY, and the run ends 'cancelled' whatever the handler then returns); a finished one is left as it is. The
-- jobs_finished trigger releases its no-TTL key and fails its waiting dependents.
-- outcome: cancelled | cancel-requested | already-finished | not-found.
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md).
with target as (
  select id, state from :PGONCE_SCHEMA.jobs where id = $2 and queue = $1 and :PGONCE_SCHEMA._keep_index(id) for update
), cancelled as (
  update :PGONCE_SCHEMA.jobs j
  set state = 'cancelled', finished_at = now(), locked_until = null
  from target t
  where j.id = t.id and :PGONCE_SCHEMA._is_pending(t.state) and :PGONCE_SCHEMA._keep_index(j.id)
  returning j.id
), requested as (
  update :PGONCE_SCHEMA.jobs j
  set cancel_requested_at = coalesce(j.cancel_requested_at, now())
  from target t
  where j.id = t.id and t.state = 'active' and :PGONCE_SCHEMA._keep_index(j.id)
  returning j.id
), notified as (
  select pg_notify(:PGONCE_CHANNEL, '!cancel ' || r.id) from requested r
)
select case
    when not exists (select 1 from target) then 'not-found'
    when exists (select 1 from cancelled) then 'cancelled'
    when exists (select 1 from requested) then 'cancel-requested'
    else 'already-finished' end as outcome,
  (select count(*) from notified)::integer as notified
