-- The owner of a dedup key while the key is held (_key_held), else no row.
select k.job_id as id
from :PGONCE_SCHEMA.dedup_keys k
join :PGONCE_SCHEMA.jobs o on o.id = k.job_id
where k.queue = $1 and k.key = $2
  and :PGONCE_SCHEMA._key_held(k.expires_at, o.state)
