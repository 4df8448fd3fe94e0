-- A page of waiting jobs (a due delayed job included) of queues $1 in the order workers claim them (priority, run_at,
-- id): at most $2, after cursor $4 ([priority, run_at, id] as text), with data containing $3 (null: any). Walks
-- jobs_due, the workers' own index.
select j.*, j.priority::text as k1, j.run_at::text as k2
from unnest($1::text[]) as q(queue)
cross join lateral (
  select j.id, j.queue, j.name, j.state, j.job_id, j.dedup_key, j.priority, j.attempts, j.max_attempts, j.run_at, j.created_at, j.started_at, j.finished_at, j.last_error
  from :PGONCE_SCHEMA.jobs j
  where j.queue = q.queue and :PGONCE_SCHEMA._is_queued(j.state) and (j.state = 'waiting' or j.run_at <= now())
    and ($4::text[] is null or (j.priority, j.run_at, j.id)
         > (($4::text[])[1]::integer, ($4::text[])[2]::timestamptz, ($4::text[])[3]::bigint))
    and ($3::jsonb is null or j.data @> $3::jsonb)
  order by j.priority, j.run_at, j.id
  limit $2
) j
order by j.priority, j.run_at, j.id
limit $2
