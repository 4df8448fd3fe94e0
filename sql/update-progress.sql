-- Stores progress $3 (JSON text) of active job $1, fenced by lock token $2: no row back means the lease was lost.
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md).
update :PGONCE_SCHEMA.jobs
set progress = $3::jsonb
where id = $1 and lock_token = $2 and state = 'active' and :PGONCE_SCHEMA._keep_index(id)
returning 1 as stored
