-- Stores progress $3 (JSON text) of active job $1, fenced by lock token $2: no row back means the lease was lost.
update :PGONCE_SCHEMA.jobs
set progress = $3::jsonb
where id = $1 and lock_token = $2 and state = 'active'
returning 1 as stored
