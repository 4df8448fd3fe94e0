-- The owner of a dedup key while the key is held (DESIGN.md §2.2), else no row.
select k.job_id as id
from :PGONCE_SCHEMA.dedup_keys k
join :PGONCE_SCHEMA.jobs o on o.id = k.job_id
where k.queue = $1 and k.key = $2
  and (k.expires_at > now()
       or (k.expires_at is null and o.state in ('waiting', 'delayed', 'waiting-children', 'active')))
