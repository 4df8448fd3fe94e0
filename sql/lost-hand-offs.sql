-- After a worker's LISTEN session was replaced: the jobs handed off to worker $1 of queue $2 that it does not hold ($3,
-- the lock tokens it holds). They were sent to the old session and their NOTIFY was lost with it; the worker gives
-- them back (sql/release-jobs.sql) instead of leaving them to the lease rescue. A hand-off is a job started in the
-- transaction that inserted it (started_at = created_at): no claim starts a job in the transaction that added it.
select j.id, j.lock_token as token
from :PGONCE_SCHEMA.jobs j
where j.queue = $2 and j.locked_by = $1 and j.state = 'active' and j.started_at = j.created_at
  and not (j.lock_token = any($3::uuid[]))
order by j.id
