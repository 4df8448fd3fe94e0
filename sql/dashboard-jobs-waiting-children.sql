-- A page of jobs waiting for their parents, of queues $1, newest first: at most $2, ids below cursor $4 ([id]), with
-- data containing $3. Walks jobs_waiting_children (id).
select j.id, j.queue, j.name, j.state, j.job_id, j.dedup_key, j.priority, j.attempts, j.max_attempts, j.run_at, j.created_at, j.started_at, j.finished_at, j.last_error
from :PGONCE_SCHEMA.jobs j
where j.queue = any($1::text[]) and j.state = 'waiting-children'
  and ($4::text[] is null or j.id < ($4::text[])[1]::bigint)
  and ($3::jsonb is null or j.data @> $3::jsonb)
order by j.id desc
limit $2
