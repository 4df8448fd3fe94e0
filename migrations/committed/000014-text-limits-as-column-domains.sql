--! Previous: sha1:a56e69aaa32b182858b9fcdd851c963d59df82fb
--! Hash: sha1:4d635b9aa475a91ce74f22c0976cecfd6d7de0f9
--! Message: text limits as column domains

-- The four text limits of a job row (000004, 000010) as domains of the columns they limit, instead of CHECKs of the
-- table. PostgreSQL prepares a table's CHECK expressions again in every statement that inserts or updates a row
-- (ExecRelCheck, once per executor run), and evaluates them for every row an UPDATE touches: the four cost ~14-25
-- µs of every single-row statement (a single-row INSERT ~50 against ~25 µs without them, an UPDATE alike; bench/
-- README.md, "The text CHECKs, prepared per statement"). A domain's CHECK is planned once per session (the type
-- cache) and runs only where a value is assigned to the column, so the claims', starts' and completions' UPDATEs,
-- which never assign these columns, skip it. Measured: a single-row INSERT and UPDATE cost as without the checks, a
-- 1,000-row INSERT the same per row.
-- The limits and their names are the same (docs/validation.md): a violation raises check_violation (23514) naming
-- jobs_queue_name, jobs_name_bytes, jobs_job_id_bytes or jobs_dedup_key_bytes. Unlike the NOT VALID CHECKs, the
-- re-typed columns check the rows already stored (the ALTER rewrites the table under an exclusive lock: on a large
-- jobs table, run it when the queue may stop for that long). The three inspection views and the jobs_finished trigger
-- read these columns, so they are dropped and created again as they were (000004).

create domain :PGONCE_SCHEMA.jobs_queue as text
  constraint jobs_queue_name check (octet_length(value) <= 128 and value ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$');
create domain :PGONCE_SCHEMA.jobs_name as text
  constraint jobs_name_bytes check (octet_length(value) between 1 and 255);
create domain :PGONCE_SCHEMA.jobs_job_id as text
  constraint jobs_job_id_bytes check (octet_length(value) between 1 and 255);
create domain :PGONCE_SCHEMA.jobs_dedup_key as text
  constraint jobs_dedup_key_bytes check (octet_length(value) between 1 and 255);

drop view :PGONCE_SCHEMA.job_counts;
drop view :PGONCE_SCHEMA.held_keys;
drop view :PGONCE_SCHEMA.failed_jobs;
drop trigger jobs_finished on :PGONCE_SCHEMA.jobs;

alter table :PGONCE_SCHEMA.jobs
  drop constraint jobs_queue_name,
  drop constraint jobs_name_bytes,
  drop constraint jobs_job_id_bytes,
  drop constraint jobs_dedup_key_bytes,
  alter column queue type :PGONCE_SCHEMA.jobs_queue,
  alter column name type :PGONCE_SCHEMA.jobs_name,
  alter column job_id type :PGONCE_SCHEMA.jobs_job_id,
  alter column dedup_key type :PGONCE_SCHEMA.jobs_dedup_key;

create trigger jobs_finished after update of state on :PGONCE_SCHEMA.jobs
for each row
when (:PGONCE_SCHEMA._is_terminal(new.state) and not :PGONCE_SCHEMA._is_terminal(old.state)
      and (new.dedup_key is not null or new.has_dependents))
execute function :PGONCE_SCHEMA._job_finished();

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
where :PGONCE_SCHEMA._key_held(k.expires_at, o.state);

-- What failed for good, and why (the dead-letter set); retry one with queue.retryJob(id).
create view :PGONCE_SCHEMA.failed_jobs as
select id, queue, name, job_id, attempts, max_attempts, last_error, error_stack, finished_at, data
from :PGONCE_SCHEMA.jobs
where state = 'failed';
