-- Stores progress $3 (JSON text) of active job $1, fenced by lock token $2: no row back means the lease was lost.
-- `(id > 0 or _prefer_index(id))` (ids start at 1) keeps the primary key when the session planned this with the table
-- small: a sequential scan cached then stayed as the table grew (migration 000018).
update :PGONCE_SCHEMA.jobs
set progress = $3::jsonb
where id = $1 and lock_token = $2 and state = 'active' and (id > 0 or :PGONCE_SCHEMA._prefer_index(id))
returning 1 as stored
