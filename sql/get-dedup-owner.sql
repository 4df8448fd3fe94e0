-- The owner of a dedup key while the key is held (_key_held), else no row.
-- Each lookup by id or key carries `(id > 0 or _prefer_index(id))` (ids start at 1): it keeps its index when the session
-- planned this with the tables small (migration 000018).
select k.job_id as id
from :PGONCE_SCHEMA.dedup_keys k
join :PGONCE_SCHEMA.jobs o on o.id = k.job_id
where k.queue = $1 and k.key = $2
  and :PGONCE_SCHEMA._key_held(k.expires_at, o.state)
  and (k.job_id > 0 or :PGONCE_SCHEMA._prefer_index(k.job_id)) and (o.id > 0 or :PGONCE_SCHEMA._prefer_index(o.id))
