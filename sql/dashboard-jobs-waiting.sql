-- Parameters of every dashboard-jobs-* list: queues $1, data containment $2 (null: no search), cursor $3 (the sort
-- key of the previous page's last row, as text), window $4 (how many jobs of each queue are read: the page size, or
-- for a search by data the most one page examines; docs/dashboard.md). Rows come in the list's order with pos (their
-- rank in it) and hit (the data contains $2): src/dashboard/server/jobs.ts keeps the hits up to the point every queue
-- was read to, cuts the page, and makes the next cursor.
-- Waiting jobs (a due delayed job included) in the order workers claim them (priority, run_at, id): each queue walks
-- jobs_due, the workers' own index.
select j.*, q.queue as window_of, row_number() over (order by j.priority, j.run_at, j.id) as pos
from unnest($1::text[]) as q(queue)
cross join lateral (
  select j.id, j.queue, j.name, j.state, j.job_id, j.dedup_key, j.priority, j.attempts, j.max_attempts, j.run_at, j.created_at, j.started_at, j.finished_at, j.last_error, j.priority::text as k1, j.run_at::text as k2, ($2::jsonb is null or j.data @> $2::jsonb) as hit
  from :PGONCE_SCHEMA.jobs j
  where j.queue = q.queue and :PGONCE_SCHEMA._is_queued(j.state) and (j.state = 'waiting' or j.run_at <= now())
    and ($3::text[] is null or (j.priority, j.run_at, j.id)
         > (($3::text[])[1]::integer, ($3::text[])[2]::timestamptz, ($3::text[])[3]::bigint))
  order by j.priority, j.run_at, j.id
  limit $4
) j
order by pos
