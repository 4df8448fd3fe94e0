--! Previous: sha1:34957861a65177a1bc1587057728195877b9c160
--! Hash: sha1:9a011953af50400878be22a6f6d4a0db63d48cad
--! Message: operations: settings, retention, schedulers, autovacuum

-- Running pgonce for months (docs/operations.md): per-queue settings in Postgres (pause, retention), the retention
-- index, job schedulers, the effects-ledger retention setting, and autovacuum settings fit for a queue table.

-- ---------------------------------------------------------------------------------------------------------------
-- Per-queue settings, shared by every process. A queue never configured has no row: the defaults apply.
create table :PGONCE_SCHEMA.queue_settings (
  queue                   text primary key,
  paused                  boolean not null default false,
  completed_retention_ms  bigint check (completed_retention_ms >= 0),
  failed_retention_ms     bigint check (failed_retention_ms >= 0),
  max_completed           integer check (max_completed >= 0),
  updated_at              timestamptz not null default now()
);
comment on table :PGONCE_SCHEMA.queue_settings is
  'Per queue: paused (workers claim nothing), retention of completed (and cancelled) and failed jobs in ms, at most max_completed completed jobs kept; null: the default of _retention_defaults().';

-- Retention for a queue that sets none: completed and cancelled jobs 24 hours, failed jobs (the dead-letter set) 7 days,
-- no cap on the number of completed jobs.
create function :PGONCE_SCHEMA._retention_defaults(out completed_ms bigint, out failed_ms bigint, out max_completed integer)
language sql immutable parallel safe as $$
  select 86400000::bigint, 604800000::bigint, null::integer
$$;

-- Whether workers of a queue may claim: not while it is paused.
create function :PGONCE_SCHEMA._queue_paused(p_queue text) returns boolean
language sql stable parallel safe as $$
  select coalesce((select s.paused from :PGONCE_SCHEMA.queue_settings s where s.queue = p_queue), false)
$$;

-- What retention may prune: a terminal job, unless it still gives a held TTL key its meaning (a key whose owner is gone
-- is not held, so the owner must stay for the key's whole window), a live dependent waits on it, or an older terminal
-- generation of its jobId is still there (getJobByCustomId answers with the newest terminal generation: prune them
-- oldest first).
create function :PGONCE_SCHEMA._prunable(j :PGONCE_SCHEMA.jobs) returns boolean
language sql stable parallel safe as $$
  select :PGONCE_SCHEMA._is_terminal(j.state)
     and not exists (select 1 from :PGONCE_SCHEMA.dedup_keys k where k.job_id = j.id and k.expires_at > now())
     and not exists (
       select 1 from :PGONCE_SCHEMA.job_dependencies d join :PGONCE_SCHEMA.jobs c on c.id = d.job_id
       where d.depends_on = j.id and :PGONCE_SCHEMA._is_live(c.state))
     and (j.job_id is null or not exists (
       select 1 from :PGONCE_SCHEMA.jobs o
       where o.job_id = j.job_id and o.id < j.id and :PGONCE_SCHEMA._is_terminal(o.state)))
$$;

-- A crashed worker's job runs again even when its attempts are used up, once: stalls counts the lease expiries of its
-- runs (see sql/rescue-expired-leases.sql).
alter table :PGONCE_SCHEMA.jobs add column stalls integer not null default 0;
comment on column :PGONCE_SCHEMA.jobs.stalls is 'How many runs of this job ended with an expired lease (a crashed or blocked worker).';

-- Terminal jobs of a queue and state by the time they finished: what retention walks, oldest first, each state up to
-- its own cutoff.
create index jobs_finished on :PGONCE_SCHEMA.jobs (queue, state, finished_at)
  where :PGONCE_SCHEMA._is_terminal(state);
-- Jobs waiting for their dependencies: what housekeeping's promotion safety net walks (without it, a sequential scan
-- of the whole table, history included, every round: 70 ms a round with 1,000,000 completed jobs).
create index jobs_waiting_children on :PGONCE_SCHEMA.jobs (id) where state = 'waiting-children';

-- ---------------------------------------------------------------------------------------------------------------
-- Schema-wide settings: one row.
create table :PGONCE_SCHEMA.settings (
  singleton            boolean primary key default true check (singleton),
  ledger_retention_ms  bigint check (ledger_retention_ms > 0)
);
comment on table :PGONCE_SCHEMA.settings is
  'ledger_retention_ms: processed_effects rows older than this are pruned by housekeeping; null (the default): the ledger is kept forever.';
insert into :PGONCE_SCHEMA.settings default values;
-- What ledger retention walks, oldest first.
create index processed_effects_recorded on :PGONCE_SCHEMA.processed_effects (recorded_at);

-- ---------------------------------------------------------------------------------------------------------------
-- Job schedulers: a job added every `every_ms`, or on the cron `pattern` in time zone `tz`, from a template. A tick is
-- taken by the worker that locks the row (FOR UPDATE SKIP LOCKED) and moves next_run_at on in the same transaction as
-- the add: one job per tick however many processes run workers. Ticks missed while nobody ran are not replayed: the
-- first tick after an outage adds one job and the schedule goes on from the next time to come.
create table :PGONCE_SCHEMA.job_schedulers (
  queue        text not null,
  id           text not null,
  every_ms     bigint check (every_ms > 0),
  pattern      text,
  tz           text,
  job_name     text not null,
  job_data     jsonb not null default '{}'::jsonb,
  job_opts     jsonb not null default '{}'::jsonb,
  next_run_at  timestamptz not null,
  last_run_at  timestamptz,
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  primary key (queue, id),
  check ((every_ms is null) <> (pattern is null))
);
comment on table :PGONCE_SCHEMA.job_schedulers is
  'One row per scheduler: every_ms or a cron pattern (tz: IANA time zone, null: UTC), the job template, the next tick.';
create index job_schedulers_due on :PGONCE_SCHEMA.job_schedulers (queue, next_run_at);

-- ---------------------------------------------------------------------------------------------------------------
-- Autovacuum fit for a queue table: every job is updated two or three times and then deleted by retention, so dead
-- row versions pile up fast; the default 20 % scale factor waits for a fifth of the table to be dead. Vacuum after
-- 1 % (plus 1,000 rows) and keep the statistics fresh; docs/operations.md gives the measurements behind these.
alter table :PGONCE_SCHEMA.jobs set (
  autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
  autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02,
  autovacuum_vacuum_cost_limit = 2000
);
alter table :PGONCE_SCHEMA.dedup_keys set (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000);
alter table :PGONCE_SCHEMA.execution_claims set (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000);
