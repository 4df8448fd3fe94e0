-- Of the runs ($1 ids, $2 lock tokens), those whose outcome was recorded: the row still carries the run's token
-- (completion and failure keep it; a release, a claim or a rescue clears or replaces it) and no longer holds a lease.
-- Asked after an outcome statement whose reply was lost (a connection dropped in a restart): did it commit?
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md).
select j.lock_token as token, j.state
from :PGONCE_SCHEMA.jobs j
join unnest($1::bigint[], $2::uuid[]) as i(id, token) on j.id = i.id and j.lock_token = i.token
where not :PGONCE_SCHEMA._holds_lease(j.state) and :PGONCE_SCHEMA._keep_index(j.id)
