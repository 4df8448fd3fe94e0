-- One job of queue $1 by its internal id $2 (a job of another queue is not this queue's to read).
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md).
select * from :PGONCE_SCHEMA.jobs where id = $2 and queue = $1 and :PGONCE_SCHEMA._keep_index(id)
