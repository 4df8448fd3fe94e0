-- Adds one plain job (no jobId, key, dependency or delay; DESIGN.md §2.1) in one statement, without add_job()'s plpgsql
-- (~0.2 ms of server time per add after the server has been idle, half that when busy). Decided from the statement's
-- snapshot, taken before the INSERT, as add_job() decides:
-- - the queue has a due waiting job: no worker to wake or hand it to (whoever added that job woke them; busy workers
--   claim again on their own): a bare INSERT, answered by id and created_at (the caller knows the rest);
-- - otherwise the job goes to the longest-idle live sign-up (see idle_workers; a sign-up whose advisory lock nobody
--   holds belongs to a gone worker and is deleted), inserted active for that worker and announced in a
--   'handoff <worker> <job>' NOTIFY (id and token only when too large for NOTIFY), exactly as add_job() hands off;
--   with no live sign-up it is inserted waiting and the queue's workers are woken. Answered by the job as JSON text.
-- The (select ... from busy) conditions are one-time filters: on the busy path no sign-up is read or locked.
with busy as materialized (
  select exists (
    select 1 from :PGONCE_SCHEMA.jobs w
    where w.queue = $1 and w.state = 'waiting' and w.run_at <= now()) as yes
), dead as (
  delete from :PGONCE_SCHEMA.idle_workers r
  where (select not yes from busy) and r.queue = $1 and r.expires_at > now()
    and pg_try_advisory_xact_lock_shared(r.alive_key)
), worker as materialized (
  -- Held by the worker's LISTEN session: alive. Locked by a concurrent add: that add's.
  select r.id, r.worker_id, r.lease_ms from :PGONCE_SCHEMA.idle_workers r
  where (select not yes from busy) and r.queue = $1 and r.expires_at > now()
    and not pg_try_advisory_xact_lock_shared(r.alive_key)
  order by r.id
  limit 1
  for update skip locked
), ins as (
  insert into :PGONCE_SCHEMA.jobs
    (queue, name, data, priority, max_attempts, backoff, state, attempts, lock_token, locked_until, locked_by, started_at)
  select $1, $2, $3::jsonb, coalesce($4::integer, 0), coalesce($5::integer, 1), $6::jsonb,
    case when w.id is null then 'waiting' else 'active' end,
    case when w.id is null then 0 else 1 end,
    case when w.id is not null then gen_random_uuid() end,
    clock_timestamp() + make_interval(secs => w.lease_ms / 1000.0),
    w.worker_id,
    case when w.id is not null then now() end
  from busy left join worker w on true
  returning *
), taken as (
  delete from :PGONCE_SCHEMA.idle_workers r using worker w where r.id = w.id
), handed as (
  -- The job as the claim statement returns it.
  select i.locked_by, i.id, i.lock_token, json_build_object(
      'id', i.id::text, 'queue', i.queue, 'name', i.name, 'job_id', i.job_id,
      'data', i.data, 'priority', i.priority, 'attempts', i.attempts,
      'max_attempts', i.max_attempts, 'backoff', i.backoff, 'dedup_key', i.dedup_key,
      'lock_token', i.lock_token, 'last_error', null, 'error_stack', null,
      'run_at_ms', extract(epoch from i.run_at)::float8 * 1000,
      'created_at_ms', extract(epoch from i.created_at)::float8 * 1000)::text as payload
  from ins i where i.state = 'active'
), woken as (
  select pg_notify(:PGONCE_CHANNEL, 'handoff ' || h.locked_by || ' ' ||
    case when octet_length(h.payload) + octet_length(h.locked_by) > 7900
         then json_build_object('id', h.id::text, 'lock_token', h.lock_token)::text
         else h.payload end)
  from handed h
  union all
  select pg_notify(:PGONCE_CHANNEL, $1) from ins i where (select not yes from busy) and i.state = 'waiting'
)
select 'added' as outcome, null::text as error,
  case when b.yes then null else (to_jsonb(i.*) || jsonb_build_object('id', i.id::text))::text end as job,
  case when b.yes then i.id::text end as id,
  case when b.yes then extract(epoch from i.created_at)::float8 * 1000 end as created_at_ms,
  (select count(*) from woken)::integer as woken
from ins i, busy b
