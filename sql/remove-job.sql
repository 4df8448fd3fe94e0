-- Deletes job $2 of queue $1 unless its handler is running ('active': refused, nothing changes). Its dedup keys and
-- dependency edges go with it (foreign keys); a pending parent's waiting dependents fail (trigger jobs_removed).
-- state: the job's state before (null: no such job in this queue); removed: whether it was deleted; cache_settle_ms:
-- how long to wait after the commit before reporting it (it owned a key held with a TTL, or one without a TTL that an
-- extend could have given one meanwhile, while a cache listener's lease lasts; $3 false, in a caller's transaction: 0).
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md).
with target as (
  select id, state from :PGONCE_SCHEMA.jobs where id = $2 and queue = $1 and :PGONCE_SCHEMA._keep_index(id) for update
), gone as (
  delete from :PGONCE_SCHEMA.jobs j using target t
  where j.id = t.id and t.state <> 'active' and :PGONCE_SCHEMA._keep_index(j.id)
  returning j.id
)
select (select state from target) as state, exists (select 1 from gone) as removed,
  :PGONCE_SCHEMA._cache_settle_ms($3::boolean and exists (
    select 1 from gone g join :PGONCE_SCHEMA.dedup_keys k on k.job_id = g.id
    where (k.expires_at is null or k.expires_at > now()) and :PGONCE_SCHEMA._keep_index(k.job_id))) as cache_settle_ms
