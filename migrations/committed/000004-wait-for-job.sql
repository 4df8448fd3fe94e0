--! Previous: sha1:25ac095ba400402dd90c15332c2ae5036ffbe24b
--! Hash: sha1:08f9b3105d533b1a5fdea7686b15cb75892a3ddd
--! Message: wait-for-job

-- queue.waitForJob(id) marks the job it waits for (jobs.waited); when a marked job reaches a terminal state, the
-- jobs_waited trigger NOTIFYs its id on the schema's waiters channel (the workers' channel followed by ':done', which
-- no worker listens on). Only marked jobs fire it: the trigger's WHEN is a column test evaluated as the row is
-- updated, so a job nobody waits for queues no trigger event and sends no NOTIFY (docs/architecture.md, "Waiting for
-- a job"). The flag stays once set: a marked job retried after it failed notifies again when it ends, which only
-- wakes a waiter that is no longer there, if any. A constant default: adding the column rewrites no row.
alter table :PGONCE_SCHEMA.jobs add column waited boolean not null default false;
comment on column :PGONCE_SCHEMA.jobs.waited is
  'queue.waitForJob() waits (or waited) for this job: its end NOTIFYs its id on the waiters channel (jobs_waited).';

-- The trigger function of jobs_waited: the payload is the job's id, delivered at commit.
create function :PGONCE_SCHEMA._job_waited() returns trigger
language plpgsql as $$
begin
  perform pg_notify(:PGONCE_CHANNEL || ':done', new.id::text);
  return null;
end
$$;

-- A job that someone waits for reaches a terminal state.
create trigger jobs_waited after update of state on :PGONCE_SCHEMA.jobs
for each row
when (new.waited and :PGONCE_SCHEMA._is_terminal(new.state) and not :PGONCE_SCHEMA._is_terminal(old.state))
execute function :PGONCE_SCHEMA._job_waited();
