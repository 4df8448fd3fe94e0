-- Parameters of every dashboard-jobs-* list: queues $1, data containment $2 (null: no search), cursor $3 (the sort
-- key of the previous page's last row, as text), window $4 (how many jobs of each queue are read: the page size, or
-- for a search by data the most one page examines; docs/dashboard.md). Rows come in the list's order with pos (their
-- rank in it) and hit (the data contains $2): src/dashboard/server/jobs.ts keeps the hits up to the point every queue
-- was read to, cuts the page, and makes the next cursor.
-- Running jobs, newest first, ids below the cursor: jobs_leases holds every running job (as many as the workers'
-- concurrency), read as one window for all queues.
select j.*, '' as window_of, row_number() over (order by j.id desc) as pos
from (
  select j.id, j.queue, j.name, j.state, j.job_id, j.dedup_key, j.priority, j.attempts, j.max_attempts, j.run_at, j.created_at, j.started_at, j.finished_at, j.last_error, ($2::jsonb is null or j.data @> $2::jsonb) as hit
  from :PGONCE_SCHEMA.jobs j
  where j.queue = any($1::text[]) and :PGONCE_SCHEMA._holds_lease(j.state)
    and ($3::text[] is null or j.id < ($3::text[])[1]::bigint)
  order by j.id desc
  limit $4
) j
order by pos
