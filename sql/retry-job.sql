-- Gives failed job $2 of queue $1 a fresh run (waiting, attempts reset, its dedup key re-taken while it is live);
-- refused (error set, nothing changed) when it is not failed, another live generation has its jobId, or another job
-- holds its dedup key. Wakes the queue's idle workers.
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md).
with target as (
  select j.id, j.queue, j.job_id, j.dedup_key, j.state from :PGONCE_SCHEMA.jobs j
  where j.id = $2 and j.queue = $1 and :PGONCE_SCHEMA._keep_index(j.id) for update
), verdict as (
  select t.id, case
    when t.state <> 'failed' then 'NOT_FAILED'
    when t.job_id is not null and exists (
      select 1 from :PGONCE_SCHEMA.jobs l
      where l.job_id = t.job_id and l.id <> t.id and :PGONCE_SCHEMA._is_live(l.state) and :PGONCE_SCHEMA._keep_index(l.id))
      then 'JOB_ID_LIVE'
    when t.dedup_key is not null and exists (
      select 1 from :PGONCE_SCHEMA.dedup_keys k join :PGONCE_SCHEMA.jobs o on o.id = k.job_id
      where k.queue = t.queue and k.key = t.dedup_key and k.job_id <> t.id
        and :PGONCE_SCHEMA._key_held(k.expires_at, o.state) and :PGONCE_SCHEMA._keep_index(k.job_id)
        and :PGONCE_SCHEMA._keep_index(o.id))
      then 'KEY_HELD'
  end as error
  from target t
), retried as (
  update :PGONCE_SCHEMA.jobs j
  set state = 'waiting', attempts = 0, run_at = now(), finished_at = null, started_at = null,
      lock_token = null, locked_until = null, locked_by = null, result = null, cancel_requested_at = null
  from verdict v
  where j.id = v.id and v.error is null and :PGONCE_SCHEMA._keep_index(j.id)
  returning j.*
), retaken as (
  -- The retried job takes its dedup key back while it is live (no TTL: released again when it ends), so that an
  -- add of the same key meanwhile answers with it instead of queueing a second job. The verdict found no other holder;
  -- the WHERE re-checks on the locked row, so a holder that appeared since is never displaced.
  insert into :PGONCE_SCHEMA.dedup_keys as k (queue, key, job_id, expires_at)
  select r.queue, r.dedup_key, r.id, null from retried r where r.dedup_key is not null
  on conflict (queue, key) do update set job_id = excluded.job_id, expires_at = null
  where (k.job_id = excluded.job_id and k.expires_at <= now())
     or (k.job_id <> excluded.job_id and not exists (
           select 1 from :PGONCE_SCHEMA.jobs o where o.id = k.job_id and :PGONCE_SCHEMA._key_held(k.expires_at, o.state)
             and :PGONCE_SCHEMA._keep_index(o.id)))
)
select v.error, r.*, case when r.id is null then false else :PGONCE_SCHEMA._wake(r.queue) end as woken
from verdict v left join retried r on r.id = v.id
