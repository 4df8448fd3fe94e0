--! Previous: sha1:09a76fbd8184eea313d7fbc3a32fc20cde2acc79
--! Hash: sha1:2a2a76c5c10c9c8807bbcd111f7529180b9fc2eb
--! Message: inspection views

-- Inspection views: the questions an operator asks in psql.

-- How many jobs per queue and state (a delayed job that is due counts as waiting).
create view :PGONCE_SCHEMA.job_counts as
select queue,
       case when state = 'delayed' and run_at <= now() then 'waiting' else state end as state,
       count(*) as jobs
from :PGONCE_SCHEMA.jobs
group by 1, 2;

-- Which dedup keys are held, by which job, until when (null: while the job is live).
create view :PGONCE_SCHEMA.held_keys as
select k.queue, k.key, k.job_id, o.state as job_state, k.expires_at
from :PGONCE_SCHEMA.dedup_keys k
join :PGONCE_SCHEMA.jobs o on o.id = k.job_id
where k.expires_at > now()
   or (k.expires_at is null and o.state in ('waiting', 'delayed', 'waiting-children', 'active'));

-- What failed for good, and why (the dead-letter set); retry one with queue.retryJob(id).
create view :PGONCE_SCHEMA.failed_jobs as
select id, queue, name, job_id, attempts, max_attempts, last_error, error_stack, finished_at, data
from :PGONCE_SCHEMA.jobs
where state = 'failed';
