-- A page of delayed jobs not yet due of queues $1, the soonest first: at most $2, after cursor $4 ([run_at, id] as
-- text), with data containing $3 (null: any). Walks jobs_delayed (queue, run_at).
select j.*, j.run_at::text as k1
from unnest($1::text[]) as q(queue)
cross join lateral (
  select j.id, j.queue, j.name, j.state, j.job_id, j.dedup_key, j.priority, j.attempts, j.max_attempts, j.run_at, j.created_at, j.started_at, j.finished_at, j.last_error
  from :PGONCE_SCHEMA.jobs j
  where j.queue = q.queue and j.state = 'delayed' and j.run_at > now()
    and ($4::text[] is null or (j.run_at, j.id) > (($4::text[])[1]::timestamptz, ($4::text[])[2]::bigint))
    and ($3::jsonb is null or j.data @> $3::jsonb)
  order by j.run_at, j.id
  limit $2
) j
order by j.run_at, j.id
limit $2
