-- The jobs search $1 names in queues $2: the job of id $4 (when $1 is all digits), the generations of that custom jobId
-- (jobs_job_id_history), and the job holding dedup key $1 (the dedup_keys primary key, one probe per queue); newest
-- first, at most $3.
select j.id, j.queue, j.name, j.state, j.job_id, j.dedup_key, j.priority, j.attempts, j.max_attempts, j.run_at, j.created_at, j.started_at, j.finished_at, j.last_error
from :PGONCE_SCHEMA.jobs j
where j.id = $4::bigint and j.queue = any($2::text[])
union
select j.id, j.queue, j.name, j.state, j.job_id, j.dedup_key, j.priority, j.attempts, j.max_attempts, j.run_at, j.created_at, j.started_at, j.finished_at, j.last_error
from :PGONCE_SCHEMA.jobs j
where j.job_id = $1 and j.queue = any($2::text[])
union
select j.id, j.queue, j.name, j.state, j.job_id, j.dedup_key, j.priority, j.attempts, j.max_attempts, j.run_at, j.created_at, j.started_at, j.finished_at, j.last_error
from :PGONCE_SCHEMA.dedup_keys k
join :PGONCE_SCHEMA.jobs j on j.id = k.job_id
where k.queue = any($2::text[]) and k.key = $1
order by id desc
limit $3
