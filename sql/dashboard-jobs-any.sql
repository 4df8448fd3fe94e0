-- A page of jobs of queues $1 in any state, newest first (by id): at most $2, ids below cursor $4 ([id]), with data
-- containing $3. Walks the primary key backwards (as sql/get-jobs.sql): a queue that is rare among many jobs of
-- others reads past them, within the statement_timeout; pick a state for an index of the queue's own.
select j.id, j.queue, j.name, j.state, j.job_id, j.dedup_key, j.priority, j.attempts, j.max_attempts, j.run_at, j.created_at, j.started_at, j.finished_at, j.last_error
from :PGONCE_SCHEMA.jobs j
where j.queue = any($1::text[])
  and ($4::text[] is null or j.id < ($4::text[])[1]::bigint)
  and ($3::jsonb is null or j.data @> $3::jsonb)
order by j.id desc
limit $2
