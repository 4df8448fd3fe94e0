-- One job of queue $1 by its internal id $2 (a job of another queue is not this queue's to read).
-- Each lookup by id or key carries `(id > 0 or _prefer_index(id))` (ids start at 1): it keeps its index when the session
-- planned this with the tables small (migration 000018).
select * from :PGONCE_SCHEMA.jobs where id = $2 and queue = $1 and (id > 0 or :PGONCE_SCHEMA._prefer_index(id))
