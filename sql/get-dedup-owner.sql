-- The owner of a dedup key while the key is held (_key_held), else no row.
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md).
select k.job_id as id
from :PGONCE_SCHEMA.dedup_keys k
join :PGONCE_SCHEMA.jobs o on o.id = k.job_id
where k.queue = $1 and k.key = $2
  and :PGONCE_SCHEMA._key_held(k.expires_at, o.state)
  and :PGONCE_SCHEMA._keep_index(k.job_id) and :PGONCE_SCHEMA._keep_index(o.id)
