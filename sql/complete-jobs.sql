-- Completes active jobs ($1 ids, $2 lock tokens, $3 results as JSON text), fenced by state and token; in the same
-- statement releases each one's no-TTL dedup key if it still owns it and promotes (and wakes) dependents whose every
-- dependency has completed. children_waiting > 0: a dependent still waits on a parent that looked unfinished (see promote-dependents).
-- $4 is always 'active': a parameter, so that a generic plan cannot drive the update from the jobs_leases partial
-- index (estimated at one row, it made a nested loop over every active lease for each input row).
with done as (
  update :PGONCE_SCHEMA.jobs j
  set state = 'completed', result = i.result::jsonb, finished_at = now(),
      lock_token = null, locked_until = null
  from unnest($1::bigint[], $2::uuid[], $3::text[]) as i(id, token, result)
  where j.id = i.id and j.state = $4::text and j.lock_token = i.token
  returning j.id, j.queue, j.dedup_key, i.token
), released as (
  delete from :PGONCE_SCHEMA.dedup_keys k using done d
  where d.dedup_key is not null
    and k.queue = d.queue and k.key = d.dedup_key and k.job_id = d.id and k.expires_at is null
), children as (
  -- A function with a fresh snapshot: it also sees a dependent added while this statement waited for its parent's lock.
  select f.job_id, f.queue, f.promoted
  from :PGONCE_SCHEMA._promote_dependents(array(select id from done)) f
), promoted as (
  select job_id as id, queue from children where promoted
), woken as (
  -- Dependents may belong to other queues, whose workers may be asleep.
  select pg_notify(:PGONCE_CHANNEL, q.queue) from (select distinct queue from promoted) q
)
select d.id, d.token,
  ((select count(*) from children) - (select count(*) from promoted))::integer as children_waiting,
  (select count(*) from woken)::integer as woken
from done d
