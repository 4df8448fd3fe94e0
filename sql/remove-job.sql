-- Deletes job $2 of queue $1 unless its handler is running ('active': refused, nothing changes). Its dedup keys and
-- dependency edges go with it (foreign keys); a pending parent's waiting dependents fail (trigger jobs_removed).
-- state: the job's state before (null: no such job in this queue); removed: whether it was deleted.
-- Each lookup by id or key carries `(id > 0 or _prefer_index(id))` (ids start at 1): it keeps its index when the session
-- planned this with the tables small (migration 000018).
with target as (
  select id, state from :PGONCE_SCHEMA.jobs where id = $2 and queue = $1 and (id > 0 or :PGONCE_SCHEMA._prefer_index(id)) for update
), gone as (
  delete from :PGONCE_SCHEMA.jobs j using target t
  where j.id = t.id and t.state <> 'active' and (j.id > 0 or :PGONCE_SCHEMA._prefer_index(j.id))
  returning j.id
)
select (select state from target) as state, exists (select 1 from gone) as removed
