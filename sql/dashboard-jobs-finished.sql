-- A page of finished jobs (state $5: completed, failed or cancelled) of queues $1, most recently finished first: at
-- most $2, after cursor $4 ([finished_at, id] as text; null: from the newest), with data containing $3 (null: any).
-- Each queue walks jobs_finished (queue, state, finished_at) backwards from the cursor; the pages of all queues are
-- merged. A containment search reads the state's jobs in that order until it has a page of matches (or the
-- statement_timeout stops it): no index on data (docs/architecture.md).
select j.*, j.finished_at::text as k1
from unnest($1::text[]) as q(queue)
cross join lateral (
  select j.id, j.queue, j.name, j.state, j.job_id, j.dedup_key, j.priority, j.attempts, j.max_attempts, j.run_at, j.created_at, j.started_at, j.finished_at, j.last_error
  from :PGONCE_SCHEMA.jobs j
  where j.queue = q.queue and j.state = $5 and :PGONCE_SCHEMA._is_terminal(j.state)
    and ($4::text[] is null or (j.finished_at, j.id) < (($4::text[])[1]::timestamptz, ($4::text[])[2]::bigint))
    and ($3::jsonb is null or j.data @> $3::jsonb)
  order by j.finished_at desc, j.id desc
  limit $2
) j
order by j.finished_at desc, j.id desc
limit $2
