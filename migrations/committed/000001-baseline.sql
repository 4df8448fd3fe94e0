--! Previous: -
--! Hash: sha1:19f6b248ccdfcc3863003a3690b5175082f4d0ad
--! Message: baseline

-- pgonce's schema, whole, in reading order: the types, the tables (with their autovacuum settings), the rules every
-- statement shares, the indexes built on them, waking workers, a job's end (flow control's slots and waitForJob's
-- marker included), adding jobs (the SQL API), what a worker receives, the Redis layer's invalidation, and the
-- inspection views. Each object says why it exists; docs/architecture.md ("The rules, each written once") says which
-- rule protects what, and docs/sql-and-migrations.md describes the tables, the SQL API and the triggers for users.
--
-- :PGONCE_SCHEMA is replaced by the (allow-listed, quoted) schema name, and :PGONCE_CHANNEL by the LISTEN/NOTIFY
-- channel of that schema (a string literal), by pgonce's runner and by graphile-migrate (.gmrc).
--
-- This baseline replaced the development history of the schema: test/helpers/legacy-migrations holds it, and
-- test/migrate.baseline.test.ts checks that both build the same catalog.

create schema if not exists :PGONCE_SCHEMA;

-- =================================================================================================================
-- Types
-- =================================================================================================================

-- The ids of jobs, unique forever (job.id). Batches draw them in input order, so that ordering inserted rows by id
-- gives the items' order.
create sequence :PGONCE_SCHEMA.job_ids;

-- A job's text limits, the same the TypeScript API checks before any I/O (docs/validation.md), for every writer, SQL
-- by hand included: a violation raises check_violation (23514) naming the limit. Domains of the columns they limit
-- rather than CHECKs of the table: PostgreSQL prepares a table's CHECK expressions again in every statement that
-- writes a row and evaluates them for every row an UPDATE touches (the four cost ~14-25 µs of every single-row
-- statement), while a domain's CHECK is planned once per session and runs only where a value is assigned to the
-- column, which the workers' claims, starts and completions never do.

-- A queue name: at most 128 bytes of letters, digits and _.:- (every character allowed is one byte). The unbounded
-- class with a length test costs ~0.7 µs where a bounded repetition {0,127} cost ~6.4 µs.
create domain :PGONCE_SCHEMA.jobs_queue as text
  constraint jobs_queue_name check (octet_length(value) <= 128 and value ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$');
-- A job's name: 1 to 255 bytes.
create domain :PGONCE_SCHEMA.jobs_name as text
  constraint jobs_name_bytes check (octet_length(value) between 1 and 255);
-- A custom jobId: 1 to 255 bytes.
create domain :PGONCE_SCHEMA.jobs_job_id as text
  constraint jobs_job_id_bytes check (octet_length(value) between 1 and 255);
-- A dedup key: 1 to 255 bytes.
create domain :PGONCE_SCHEMA.jobs_dedup_key as text
  constraint jobs_dedup_key_bytes check (octet_length(value) between 1 and 255);

-- Why an add was rejected (nothing written): extend of a key whose owner is no longer pending, replace of an owner a
-- live job depends on, a dependsOn id that does not exist. queue.add turns them into DeduplicationError and
-- ValidationError.
create type :PGONCE_SCHEMA.admission_error as enum
  ('EXTEND_NOT_PENDING', 'REPLACE_HAS_DEPENDENTS', 'DEPENDENCY_NOT_FOUND');

-- =================================================================================================================
-- Tables
-- =================================================================================================================

-- What an add leaves unsaid: priority 0 and one attempt. Scalar SQL functions, so that the jobs table's column
-- defaults below are folded to constants at plan time (a record-returning call in a default ran for every row: a
-- 200,000-row INSERT leaving both to their defaults took 1.31-1.49 s against 0.74-0.77 s), and the add statements
-- read the same values from the same place.
create function :PGONCE_SCHEMA._default_priority() returns integer
language sql immutable parallel safe as $$
  select 0
$$;

create function :PGONCE_SCHEMA._default_max_attempts() returns integer
language sql immutable parallel safe as $$
  select 1
$$;

-- One row per job generation: the queue itself. Every decision about a job (claimed once, fenced by its lock token,
-- ended once) is a change of its row; its states are the rules of the next section.
create table :PGONCE_SCHEMA.jobs (
  id            bigint primary key default nextval(':PGONCE_SCHEMA.job_ids'),
  queue         :PGONCE_SCHEMA.jobs_queue not null,
  name          :PGONCE_SCHEMA.jobs_name not null,
  -- The custom jobId: unique among live generations of all queues (jobs_live_job_id).
  job_id        :PGONCE_SCHEMA.jobs_job_id,
  data          jsonb not null,
  state         text not null default 'waiting'
                check (state in ('waiting', 'delayed', 'waiting-children', 'active',
                                 'completed', 'failed', 'cancelled')),
  -- Claims take jobs by priority (lower first), then run_at, then id.
  priority      integer not null default :PGONCE_SCHEMA._default_priority(),
  run_at        timestamptz not null default now(),
  -- Handler starts so far, and the most allowed.
  attempts      integer not null default 0,
  max_attempts  integer not null default :PGONCE_SCHEMA._default_max_attempts(),
  backoff       jsonb,
  -- The key the job was added with; its release at the job's end is generation-safe (jobs_finished).
  dedup_key     :PGONCE_SCHEMA.jobs_dedup_key,
  -- The current run's token, which fences every later change of the job, its lease, and the worker holding it.
  lock_token    uuid,
  locked_until  timestamptz,
  locked_by     text,
  last_error    text,
  error_stack   text,
  result        jsonb,
  created_at    timestamptz not null default now(),
  started_at    timestamptz,
  -- When it reached a terminal state: retention counts from it.
  finished_at   timestamptz,
  has_dependents boolean not null default false,
  cancel_requested_at timestamptz,
  -- The last ctx.updateProgress value.
  progress      jsonb,
  trace_context text,
  stalls        integer not null default 0,
  -- A run's deadline: the claim sets timeout_at from timeout_ms (else the worker's timeoutMs) on the database clock.
  timeout_ms    integer check (timeout_ms > 0),
  timeout_at    timestamptz,
  -- The concurrency slot the current (or last) run of a job took, null if none; negated (-slot) once its completion
  -- (sql/complete-jobs.sql) freed it, in one update for the batch. Only a run still holding its slot (> 0) fires
  -- jobs_slot_released (its WHEN), so a completion, and the end of a job that took no slot (a queue without limits, or
  -- with a rate limit only), call no trigger function; the other ends free the slot by primary key.
  limit_slot    integer,
  -- A job's group (add(name, data, { group: { id } })), null for none: 1 to 128 characters. group_slot is the group
  -- concurrency slot its current (or last) run took, as limit_slot (negated once its completion freed it).
  group_id      text constraint jobs_group_id check (group_id <> '' and length(group_id) <= 128),
  group_slot    integer,
  -- queue.waitForJob(id) marks the job it waits for; its end then NOTIFYs its id (jobs_waited, "A job's end"). The
  -- flag stays once set: a marked job retried after it failed notifies again when it ends, which only wakes a waiter
  -- that is no longer there, if any.
  waited        boolean not null default false
) with (
  -- Every job is updated two or three times and then deleted by retention, so dead row versions pile up fast, and
  -- the default 20 % scale factor waits for a fifth of the table to be dead: vacuum after 1 % (plus 1,000 rows), and
  -- keep the statistics fresh (docs/operations.md gives the measurements behind these).
  autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
  autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02,
  autovacuum_vacuum_cost_limit = 2000
);
comment on table :PGONCE_SCHEMA.jobs is
  'One row per job generation. state: waiting|delayed|waiting-children|active|completed|failed|cancelled. attempts counts handler starts.';
comment on column :PGONCE_SCHEMA.jobs.has_dependents is 'A job added with dependsOn names this one: its end promotes or fails them (jobs_finished).';
comment on column :PGONCE_SCHEMA.jobs.cancel_requested_at is 'queue.cancelJob() on a running job: its handler is aborted and it ends cancelled.';
comment on column :PGONCE_SCHEMA.jobs.trace_context is 'W3C traceparent of the add, continued by the worker''s span.';
-- A crashed worker's job runs again even when its attempts are used up, once (sql/rescue-expired-leases.sql).
comment on column :PGONCE_SCHEMA.jobs.stalls is 'How many runs of this job ended with an expired lease (a crashed or blocked worker).';
comment on column :PGONCE_SCHEMA.jobs.timeout_ms is
  'queue.add''s timeoutMs: how long a run may take, in ms; null: the worker''s timeoutMs, if any.';
comment on column :PGONCE_SCHEMA.jobs.timeout_at is
  'The current (or last) run''s deadline, set by the claim: started_at + timeout_ms, else the worker''s timeoutMs.';
comment on column :PGONCE_SCHEMA.jobs.waited is
  'queue.waitForJob() waits (or waited) for this job: its end NOTIFYs its id on the waiters channel (jobs_waited).';

-- The edges of dependsOn: job_id waits on depends_on. Every edge is kept, blocking or not: a live dependent keeps
-- its parents from being replaced or pruned. The edges go with either job.
create table :PGONCE_SCHEMA.job_dependencies (
  job_id      bigint not null,
  depends_on  bigint not null,
  primary key (job_id, depends_on),
  constraint job_dependencies_job foreign key (job_id) references :PGONCE_SCHEMA.jobs (id) on delete cascade,
  constraint job_dependencies_parent foreign key (depends_on) references :PGONCE_SCHEMA.jobs (id) on delete cascade
);

-- The dedup keys and their owners (docs/deduplication.md). A key goes with its owner: a key whose owner is gone is
-- not held anyway. Rewritten on every keyed add and swept when its TTL ends, hence a vacuum sooner than the default.
create table :PGONCE_SCHEMA.dedup_keys (
  queue       text not null,
  key         text not null,
  job_id      bigint not null,
  -- The end of the TTL; null: held while the owner is live.
  expires_at  timestamptz,
  primary key (queue, key),
  constraint dedup_keys_owner foreign key (job_id) references :PGONCE_SCHEMA.jobs (id) on delete cascade
) with (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000);
comment on table :PGONCE_SCHEMA.dedup_keys is
  'Held while the owner row exists and (expires_at > now() or (expires_at is null and the owner is live)).';

-- runOnce claims (docs/effects.md): one row per key, 'running' under the holder's token until expires_at, then a
-- 'done' marker (expires_at null: kept forever). Written and swept as often as dedup keys.
create table :PGONCE_SCHEMA.execution_claims (
  key         text primary key,
  state       text not null check (state in ('running', 'done')),
  token       uuid,
  expires_at  timestamptz
) with (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000);

-- The durable ledger of effects that happened (docs/effects.md): a row means the effect was applied.
create table :PGONCE_SCHEMA.processed_effects (
  effect_key   text primary key,
  recorded_at  timestamptz not null default now(),
  -- The job whose ctx.effect recorded the row (null: recorded by effects.record() outside a job), so that a job's
  -- page (the dashboard, SQL) lists its effects. No foreign key: the ledger outlives the jobs retention deletes, and an
  -- effect stays recorded after its job is gone.
  job_id       bigint
);
comment on column :PGONCE_SCHEMA.processed_effects.job_id is
  'The job whose ctx.effect recorded the row; null: recorded outside a job (effects.record()).';

-- Per-queue settings, shared by every process (docs/operations.md). A queue never configured has no row: the
-- defaults apply.
create table :PGONCE_SCHEMA.queue_settings (
  queue                   text primary key,
  paused                  boolean not null default false,
  completed_retention_ms  bigint check (completed_retention_ms >= 0),
  failed_retention_ms     bigint check (failed_retention_ms >= 0),
  max_completed           integer check (max_completed >= 0),
  updated_at              timestamptz not null default now(),
  -- Flow control (docs/flow-control.md, and limit_slots below): queue.setLimits's queue-wide concurrency and rate
  -- limit, and ctx.rateLimit's hold of the queue.
  concurrency             integer check (concurrency > 0),
  rate_max                integer check (rate_max > 0),
  rate_duration_ms        bigint check (rate_duration_ms > 0),
  rate_paused_until       timestamptz,
  -- The same limits for each group of the queue (jobs.group_id), and the latest hold of any of its groups.
  group_concurrency       integer check (group_concurrency > 0),
  group_rate_max          integer check (group_rate_max > 0),
  group_rate_duration_ms  bigint check (group_rate_duration_ms > 0),
  group_paused_until      timestamptz,
  constraint queue_settings_rate_limit check ((rate_max is null) = (rate_duration_ms is null)),
  constraint queue_settings_group_rate_limit check ((group_rate_max is null) = (group_rate_duration_ms is null))
);
comment on table :PGONCE_SCHEMA.queue_settings is
  'Per queue: paused (workers claim nothing), retention of completed (and cancelled) and failed jobs in ms, at most max_completed completed jobs kept; null: the default of _retention_defaults().';
comment on column :PGONCE_SCHEMA.queue_settings.concurrency is
  'queue.setLimits concurrency: at most this many jobs of the queue active at once (limit_slots); null: no limit.';
comment on column :PGONCE_SCHEMA.queue_settings.rate_max is
  'queue.setLimits rateLimit.max: at most this many starts in any rate_duration_ms (limit_rate_slots); null: no limit.';
comment on column :PGONCE_SCHEMA.queue_settings.rate_paused_until is
  'ctx.rateLimit(ms): no job of the queue starts before this time.';
comment on column :PGONCE_SCHEMA.queue_settings.group_concurrency is
  'setLimits group.concurrency: at most this many jobs of each group active at once; null: no limit.';
comment on column :PGONCE_SCHEMA.queue_settings.group_rate_max is
  'setLimits group.rateLimit.max: at most this many starts of each group in any group_rate_duration_ms.';
comment on column :PGONCE_SCHEMA.queue_settings.group_paused_until is
  'The latest ctx.rateLimit(ms, { scope: ''group'' }) hold of any group of the queue (limit_groups.paused_until).';

-- Flow control (docs/flow-control.md): a queue-wide concurrency and a sliding-window rate limit, stored per queue in
-- queue_settings (queue.setLimits) and enforced by the claim itself through reservation rows: a claim of a limited
-- queue (sql/claim-jobs-limited.sql) takes free rows FOR UPDATE SKIP LOCKED and starts at most as many jobs as it
-- took, in one statement. A concurrency slot is freed by the trigger jobs_slot_released in the transaction that ends
-- the run, fenced by its lock token; a rate row is never freed, it ages: it may be taken again durationMs after its
-- last start. Groups (jobs.group_id): the same limits per group id (queue_settings.group_*), enforced by
-- sql/claim-jobs-grouped.sql with the group's own slot and rate rows, made by the claims that first take them; it
-- serves the groups round robin, in group id order from after the group each worker's previous claim served last.

-- A concurrency limit's slots: `concurrency` rows per queue (group_id '' for the queue-wide limit), free while job_id
-- is null. A group's slots (group_id the group's id) are made by the grouped claim that first takes them (an upsert
-- that takes a missing or free row, re-checked on its newest version), and record when they were last taken
-- (taken_at). A claim takes free ones FOR UPDATE SKIP LOCKED and writes its job's id and lock token into each. Only the
-- primary key is indexed, and half of each page is left free, so that taking and freeing a slot are HOT updates (no
-- index entry to write; each claim and each end of a run updates a slot row).
create table :PGONCE_SCHEMA.limit_slots (
  queue       text not null,
  group_id    text not null default '',
  slot        integer not null check (slot > 0),
  job_id      bigint,
  lock_token  uuid,
  taken_at    timestamptz not null default '-infinity',
  primary key (queue, group_id, slot)
) with (fillfactor = 50);
comment on table :PGONCE_SCHEMA.limit_slots is
  'Concurrency slots (queue.setLimits concurrency): job_id and lock_token of the run holding each, null when free.';

-- A rate limit's rows: `max` rows per queue, each holding the time of the start that last used it. A start takes a row
-- last used at least durationMs ago, so no interval of durationMs holds more than max starts. Half of each page is
-- left free so that a start's update of used_at is a HOT update, as for limit_slots.
create table :PGONCE_SCHEMA.limit_rate_slots (
  queue     text not null,
  group_id  text not null default '',
  slot      integer not null check (slot > 0),
  used_at   timestamptz not null default '-infinity',
  primary key (queue, group_id, slot)
) with (fillfactor = 50);
comment on table :PGONCE_SCHEMA.limit_rate_slots is
  'Rate-limit rows (queue.setLimits rateLimit): the start that last used each; reusable rate_duration_ms later.';

-- A group's ctx.rateLimit(ms, { scope: 'group' }) hold: none of its jobs starts before paused_until.
create table :PGONCE_SCHEMA.limit_groups (
  queue         text not null,
  group_id      text not null,
  paused_until  timestamptz not null,
  primary key (queue, group_id)
);
comment on table :PGONCE_SCHEMA.limit_groups is
  'Groups held by a handler''s ctx.rateLimit(ms, { scope: ''group'' }): none of their jobs starts before paused_until.';

-- Schema-wide settings: one row, inserted here.
create table :PGONCE_SCHEMA.settings (
  singleton            boolean primary key default true check (singleton),
  ledger_retention_ms  bigint check (ledger_retention_ms > 0),
  -- Which database the Redis keys belong to (src/cache/keys.ts): two databases that share a Redis and a schema name
  -- never read each other's keys. A copy restored elsewhere keeps it: give the copy its own Redis, or a new value.
  cache_instance       text not null default substr(md5(random()::text || clock_timestamp()::text), 1, 12)
);
comment on table :PGONCE_SCHEMA.settings is
  'ledger_retention_ms: processed_effects rows older than this are pruned by housekeeping; null (the default): the ledger is kept forever.';
insert into :PGONCE_SCHEMA.settings default values;

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

-- The optional Redis layer's epochs (docs/redis.md; the whole argument is in src/cache/invalidation.ts). Every cache
-- identity ('k <queue> <key>' for a dedup key, 'e <key>' for a ledger row, 'c <key>' for a runOnce claim) falls into
-- one of 256 buckets; cached entries are named after the epoch of their bucket read in the same snapshot as their
-- fact, so a bump (section "The Redis layer's invalidation") makes every older entry of the bucket unreachable at
-- once. Each bucket starts at the clock in microseconds.
create table :PGONCE_SCHEMA.cache_epochs (
  bucket  smallint primary key check (bucket between 0 and 255),
  epoch   bigint not null
);
comment on table :PGONCE_SCHEMA.cache_epochs is
  'The Redis layer''s epoch of each bucket of cache identities, bumped when a cacheable fact of the bucket ends (microseconds since 1970 or more: never reused after a restore).';
insert into :PGONCE_SCHEMA.cache_epochs (bucket, epoch)
select b, (extract(epoch from clock_timestamp()) * 1000000)::bigint from generate_series(0, 255) b;

-- Paced housekeeping (docs/operations.md). A Worker's housekeeping pauses after each full batch for three times as
-- long as the batch took, so that working off a backlog leaves the server to the queue's own work (a 50,000-job drain
-- beside it ran at 0.84x its speed alone, against 0.63x beside back-to-back rounds). The runner pausing writes this
-- row in its batch's transaction, and until paused_until the other runners' rounds stop at their first batch: a
-- fleet of workers prunes at one runner's pace.
create table :PGONCE_SCHEMA.housekeeping_pace (
  singleton     boolean primary key default true check (singleton),
  runner        uuid not null,
  paused_until  timestamptz not null
);
comment on table :PGONCE_SCHEMA.housekeeping_pace is
  'The paced housekeeping round (a Worker''s) between two batches: until paused_until, rounds of other runners leave the work to runner.';

-- =================================================================================================================
-- The rules
-- =================================================================================================================
-- Each rule is written once, as a function every path uses. The small ones are immutable or stable SQL functions:
-- the planner inlines them, in queries and in the partial indexes' predicates alike, so that changing one means
-- rebuilding the indexes that use it.

-- The job states. Pending: not started (only a worker's claim makes a job active, and a worker claims only what it
-- starts: docs/workers.md), so replace, extend, cancel and removal act on every pending job.
create function :PGONCE_SCHEMA._is_pending(state text) returns boolean
language sql immutable parallel safe as $$
  select state in ('waiting', 'delayed', 'waiting-children')
$$;

-- Live: pending or running. A jobId is unique among live jobs; a no-TTL key is held while its owner is live.
create function :PGONCE_SCHEMA._is_live(state text) returns boolean
language sql immutable parallel safe as $$
  select state in ('waiting', 'delayed', 'waiting-children', 'active')
$$;

-- Terminal: finished for good (until retryJob); the history that retention prunes.
create function :PGONCE_SCHEMA._is_terminal(state text) returns boolean
language sql immutable parallel safe as $$
  select state in ('completed', 'failed', 'cancelled')
$$;

-- Queued: waiting for a worker to claim it, once run_at has come.
create function :PGONCE_SCHEMA._is_queued(state text) returns boolean
language sql immutable parallel safe as $$
  select state in ('waiting', 'delayed')
$$;

-- Leased: held by a worker under lock_token until locked_until; what the rescue of expired leases walks.
create function :PGONCE_SCHEMA._holds_lease(state text) returns boolean
language sql immutable parallel safe as $$
  select state = 'active'
$$;

-- A dedup key is held while its owner row exists and either its TTL runs, or it has no TTL and the owner is live.
-- owner_state is null when the owner row is missing (deleted by hand or pruned): not held.
create function :PGONCE_SCHEMA._key_held(expires_at timestamptz, owner_state text) returns boolean
language sql stable parallel safe as $$
  select owner_state is not null
     and (expires_at > now() or (expires_at is null and :PGONCE_SCHEMA._is_live(owner_state)))
$$;

-- The job defaults together, for SQL callers. plpgsql: PostgreSQL 15 cannot inline a SQL function
-- that returns a record, and plans its body again in every statement that calls it (~30 µs a call); a plpgsql
-- function keeps its compiled form for the session.
create function :PGONCE_SCHEMA._job_defaults(out priority integer, out max_attempts integer)
language plpgsql immutable parallel safe as $$
begin
  priority := :PGONCE_SCHEMA._default_priority();
  max_attempts := :PGONCE_SCHEMA._default_max_attempts();
end
$$;

-- A new job's state: waiting-children while it waits on parents, delayed while its delay runs, else waiting. Shared by
-- every INSERT of jobs, so that none of them can disagree on what a new job is.
create function :PGONCE_SCHEMA._new_job_state(p_blocked boolean, p_delay_ms bigint) returns text
language sql immutable parallel safe as $$
  select case when coalesce(p_blocked, false) then 'waiting-children'
              when coalesce(p_delay_ms, 0) > 0 then 'delayed' else 'waiting' end
$$;

-- When a job added now with that delay is due.
create function :PGONCE_SCHEMA._due_at(p_delay_ms bigint) returns timestamptz
language sql stable parallel safe as $$
  select now() + make_interval(secs => coalesce(p_delay_ms, 0) / 1000.0)
$$;

-- The delay, in whole ms from now() (the database clock), after which a job added now is due at p_run_at: a time in
-- the past is a delay of 0 (due now). Rounded up, so that _due_at() of it is never before p_run_at. Every add path
-- turns a runAt into a delay with it, so that _new_job_state() and _due_at() stay the one rule for a new job.
create function :PGONCE_SCHEMA._delay_until(p_run_at timestamptz) returns bigint
language sql stable parallel safe as $$
  select case when p_run_at is null then null
              else greatest(0, ceil(extract(epoch from (p_run_at - now())) * 1000))::bigint end
$$;

-- Retention for a queue that sets none: completed and cancelled jobs 24 hours, failed jobs (the dead-letter set) 7
-- days, no cap on the number of completed jobs.
create function :PGONCE_SCHEMA._retention_defaults(out completed_ms bigint, out failed_ms bigint, out max_completed integer)
language sql immutable parallel safe as $$
  select 86400000::bigint, 604800000::bigint, null::integer
$$;

-- Whether workers of a queue may claim: not while it is paused.
create function :PGONCE_SCHEMA._queue_paused(p_queue text) returns boolean
language sql stable parallel safe as $$
  select coalesce((select s.paused from :PGONCE_SCHEMA.queue_settings s where s.queue = p_queue), false)
$$;

-- Whether a queue's settings limit its groups (or hold one of them now).
create function :PGONCE_SCHEMA._grouped(s :PGONCE_SCHEMA.queue_settings) returns boolean
language sql stable parallel safe as $$
  select s.group_concurrency is not null or s.group_rate_max is not null or coalesce(s.group_paused_until > now(), false)
$$;

-- Whether a claim of p_queue must go through sql/claim-jobs-limited.sql: it has a limit, or ctx.rateLimit holds it.
-- The plain claim (sql/claim-jobs.sql) gives nothing for such a queue, nor for a paused one: one lookup of its row.
create function :PGONCE_SCHEMA._queue_held(p_queue text) returns boolean
language sql stable parallel safe as $$
  select coalesce((select s.paused or s.concurrency is not null or s.rate_max is not null
                     or coalesce(s.rate_paused_until > now(), false) or :PGONCE_SCHEMA._grouped(s)
                   from :PGONCE_SCHEMA.queue_settings s where s.queue = p_queue), false)
$$;

-- Whether p_queue has a limit (the worker's choice of claim statement; sql/queue-limited.sql).
create function :PGONCE_SCHEMA._queue_limited(p_queue text) returns boolean
language sql stable parallel safe as $$
  select coalesce((select s.concurrency is not null or s.rate_max is not null
                     or coalesce(s.rate_paused_until > now(), false) or :PGONCE_SCHEMA._grouped(s)
                   from :PGONCE_SCHEMA.queue_settings s where s.queue = p_queue), false)
$$;

-- Whether p_queue's claims go through sql/claim-jobs-grouped.sql: it has a group limit, or a group is held.
create function :PGONCE_SCHEMA._queue_grouped(p_queue text) returns boolean
language sql stable parallel safe as $$
  select coalesce((select :PGONCE_SCHEMA._grouped(s) from :PGONCE_SCHEMA.queue_settings s where s.queue = p_queue), false)
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

-- Plans that keep their indexes when a table's statistics say it is tiny. A session caches one generic plan per
-- statement, made at its sixth run, and makes it again only when a table's statistics change. Vacuumed or analysed
-- while nearly empty (a fresh install, a queue just pruned), dedup_keys and jobs are planned as one page, where a
-- sequential scan costs less than an index; with autovacuum off, or until its next analyse, that plan stays while the
-- tables grow (keyed adds at 0.6-0.75x their rate; a worker started on a small queue completed every batch by scanning
-- the whole table, 7x slower). PostgreSQL has no per-query hints, and a top-level statement cannot carry a planner
-- setting, so the statements that find jobs or keys by id or key carry the qual below.
--
-- _prefer_index is never true, and declared expensive: in a qual `(x or _prefer_index(id))` whose x holds for every
-- row the statement wants, a sequential scan is charged 2.5 cost units for each row of the table, an index scan only
-- for the rows it fetches. Analysed at a given size, a lookup of one id or key keeps its index from 4 rows (without the
-- qual: from ~400), a lookup of a list of ids (a generic plan assumes ten) from ~20 rows (without: somewhere between
-- 1,000 and 5,000). A table never analysed is planned as at least ten pages, so it keeps them too. The qual's cost
-- stays low enough that a plan does not cross jit_above_cost (100,000) below ~9,000 ids in one statement. At run time
-- x is true and the function is never called: an index scan drops the qual its condition implies, and OR stops at its
-- first true argument. Not for a claim's pick: its LIMIT is a parameter, planned as a tenth of the queue, so the
-- qual's cost would grow with the queue and cross jit_above_cost.
create function :PGONCE_SCHEMA._prefer_index(p_id bigint) returns boolean
language plpgsql immutable cost 1000 as $$
begin
  return false;
end
$$;

-- The qual itself, in one home: job ids start at 1, so `id > 0` holds for every row and _prefer_index() is never
-- called. An SQL function the planner inlines, so that each statement gets the same expression and its cost.
create function :PGONCE_SCHEMA._keep_index(p_id bigint) returns boolean
language sql immutable as $$
  select p_id > 0 or :PGONCE_SCHEMA._prefer_index(p_id)
$$;

-- =================================================================================================================
-- Indexes
-- =================================================================================================================

-- A custom jobId is unique among live generations, across all queues; the adds' ON CONFLICT names this index.
create unique index jobs_live_job_id on :PGONCE_SCHEMA.jobs (job_id)
  where job_id is not null and :PGONCE_SCHEMA._is_live(state);
-- History lookup of a custom id (getJobByCustomId: the newest terminal generation).
create index jobs_job_id_history on :PGONCE_SCHEMA.jobs (job_id, id)
  where job_id is not null;
-- The claim order of workers: priority, then run_at, then id.
create index jobs_due on :PGONCE_SCHEMA.jobs (queue, priority, run_at, id)
  where :PGONCE_SCHEMA._is_queued(state);
-- The queued jobs of each group in the claim order: a grouped claim finds the groups with queued jobs (one descent
-- each) and each group's next jobs. Partial: a job without a group adds no entry.
create index jobs_group_due on :PGONCE_SCHEMA.jobs (queue, group_id, priority, run_at, id)
  where group_id is not null and :PGONCE_SCHEMA._is_queued(state);
-- The next delayed job of a queue, for a worker's due timer (without walking jobs_due's entries of waiting jobs).
create index jobs_delayed on :PGONCE_SCHEMA.jobs (queue, run_at)
  where state = 'delayed';
-- Leases, for the rescue of expired ones.
create index jobs_leases on :PGONCE_SCHEMA.jobs (locked_until)
  where :PGONCE_SCHEMA._holds_lease(state);
-- Terminal jobs of a queue and state by the time they finished: what retention walks, oldest first, each state up to
-- its own cutoff.
create index jobs_finished on :PGONCE_SCHEMA.jobs (queue, state, finished_at)
  where :PGONCE_SCHEMA._is_terminal(state);
-- Jobs waiting for their dependencies: what housekeeping's promotion safety net walks (without it, a sequential scan
-- of the whole table, history included, every round: 70 ms a round with 1,000,000 completed jobs).
create index jobs_waiting_children on :PGONCE_SCHEMA.jobs (id) where state = 'waiting-children';
-- The dependents of a parent, for its end and for replace.
create index job_dependencies_parent on :PGONCE_SCHEMA.job_dependencies (depends_on);
-- Expired TTL keys, for the sweep.
create index dedup_keys_expiry on :PGONCE_SCHEMA.dedup_keys (expires_at)
  where expires_at is not null;
-- The keys of a job, for the cascade of its deletion and retention's check of its held TTL keys.
create index dedup_keys_job on :PGONCE_SCHEMA.dedup_keys (job_id);
-- Expired runOnce claims, for the sweep.
create index execution_claims_expiry on :PGONCE_SCHEMA.execution_claims (expires_at)
  where expires_at is not null;
-- What ledger retention walks, oldest first.
create index processed_effects_recorded on :PGONCE_SCHEMA.processed_effects (recorded_at);
-- The effects a job recorded, for its page (the dashboard).
create index processed_effects_job on :PGONCE_SCHEMA.processed_effects (job_id) where job_id is not null;
-- A queue's due schedulers, for its workers' ticks.
create index job_schedulers_due on :PGONCE_SCHEMA.job_schedulers (queue, next_run_at);

-- =================================================================================================================
-- Waking workers
-- =================================================================================================================
-- An idle worker holds, on its LISTEN connection, a session advisory lock on one of four idle slots of its queue
-- (workers past four stay unlisted: every NOTIFY reaches them too, and each wake-up re-deals the slots). An add
-- NOTIFYs only when a slot is held: busy workers claim again on their own, and NOTIFY serialises commits. No table is
-- read, so adds do not walk dead rows however long another transaction holds back the xmin horizon.

-- The advisory-lock key of idle slot p_slot (0 to 3) of p_queue: the queue's hash with its two low bits the slot.
create function :PGONCE_SCHEMA._idle_slot_key(p_queue text, p_slot integer) returns bigint
language sql immutable parallel safe as $$
  select (hashtextextended(:PGONCE_CHANNEL || ':idle:' || p_queue, 0) & ~3::bigint) | p_slot
$$;

-- Whether an idle worker of p_queue holds one of its slots: a shared try-lock given back in the same expression, so
-- that adds never wait for each other. One expression (a CASE evaluates its branches in order), about 3 µs, and a SQL
-- function that the planner inlines into the statements calling it: as a plpgsql call it was ~7 µs, about 6% of a
-- plain add. Each slot's key is computed where it is used: an inlined expression cannot hold a variable.
create function :PGONCE_SCHEMA._idle_worker_waits(p_queue text) returns boolean
language sql volatile as $$
  select case
    when not pg_try_advisory_lock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 0)) then true
    when not pg_advisory_unlock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 0)) then true
    when not pg_try_advisory_lock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 1)) then true
    when not pg_advisory_unlock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 1)) then true
    when not pg_try_advisory_lock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 2)) then true
    when not pg_advisory_unlock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 2)) then true
    when not pg_try_advisory_lock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 3)) then true
    when not pg_advisory_unlock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 3)) then true
    else false end
$$;

-- Wakes the idle workers of p_queue (NOTIFY, delivered at commit) if there are any; true if it did.
create function :PGONCE_SCHEMA._wake(p_queue text) returns boolean
language plpgsql volatile as $$
begin
  if :PGONCE_SCHEMA._idle_worker_waits(p_queue) then
    perform pg_notify(:PGONCE_CHANNEL, p_queue);
    return true;
  end if;
  return false;
end
$$;

-- =================================================================================================================
-- A job's end
-- =================================================================================================================
-- Whatever ends a job (a worker's completion or failure, housekeeping's rescue, cancelJob, an operator's UPDATE), in
-- the same transaction: a no-TTL dedup key is released if this job still owns it (generation-safe), and its dependents
-- waiting in 'waiting-children' are promoted (when it completed and their other parents have too) or failed (when it
-- failed or was cancelled: they can never run).

-- Promotes or fails the dependents of p_parent, which just ended in p_parent_state ('removed': deleted while pending).
create function :PGONCE_SCHEMA._promote_or_fail_dependents(p_parent bigint, p_parent_state text) returns void
language plpgsql volatile as $$
declare
  v_child record;
begin
  -- Lock the dependents first, then read their parents with a fresh snapshot: two parents of one dependent
  -- completing at once take turns on its row lock, and the second sees the first completed.
  for v_child in
    select c.id from :PGONCE_SCHEMA.jobs c
    where c.id in (select d.job_id from :PGONCE_SCHEMA.job_dependencies d where d.depends_on = p_parent)
      and c.state = 'waiting-children'
    order by c.id
    for update
  loop
    if p_parent_state <> 'completed' then
      update :PGONCE_SCHEMA.jobs set state = 'failed', finished_at = now(),
        last_error = format('dependency %s %s', p_parent, case p_parent_state when 'removed' then 'was removed' else 'ended ' || p_parent_state end)
      where id = v_child.id and state = 'waiting-children';
    elsif not exists (
      select 1 from :PGONCE_SCHEMA.job_dependencies d join :PGONCE_SCHEMA.jobs p on p.id = d.depends_on
      where d.job_id = v_child.id and p.id <> p_parent and p.state <> 'completed'
    ) then
      update :PGONCE_SCHEMA.jobs
      -- clock_timestamp(): the dependent may have been added after this transaction began. Due now, it goes behind
      -- the jobs already queued (its add may be long past).
      set state = case when run_at <= clock_timestamp() then 'waiting' else 'delayed' end, run_at = greatest(run_at, now())
      where id = v_child.id and state = 'waiting-children';
      perform :PGONCE_SCHEMA._wake(queue) from :PGONCE_SCHEMA.jobs where id = v_child.id;
    end if;
  end loop;
end
$$;

-- The trigger function of jobs_finished.
create function :PGONCE_SCHEMA._job_finished() returns trigger
language plpgsql as $$
begin
  if new.dedup_key is not null then
    delete from :PGONCE_SCHEMA.dedup_keys k
    where k.queue = new.queue and k.key = new.dedup_key and k.job_id = new.id and k.expires_at is null;
  end if;
  if new.has_dependents then
    perform :PGONCE_SCHEMA._promote_or_fail_dependents(new.id, new.state);
  end if;
  return null;
end
$$;

-- A job reaches a terminal state. Only jobs with a key or dependents fire it, so that a plain completion pays nothing.
create trigger jobs_finished after update of state on :PGONCE_SCHEMA.jobs
for each row
when (:PGONCE_SCHEMA._is_terminal(new.state) and not :PGONCE_SCHEMA._is_terminal(old.state)
      and (new.dedup_key is not null or new.has_dependents))
execute function :PGONCE_SCHEMA._job_finished();

-- The trigger function of jobs_removed.
create function :PGONCE_SCHEMA._job_removed() returns trigger
language plpgsql as $$
begin
  perform :PGONCE_SCHEMA._promote_or_fail_dependents(old.id, 'removed');
  return old;
end
$$;

-- A parent deleted before it completed (removeJob of a pending job): its waiting dependents can never run.
create trigger jobs_removed before delete on :PGONCE_SCHEMA.jobs
for each row
when (old.has_dependents and old.state <> 'completed')
execute function :PGONCE_SCHEMA._job_removed();

-- The trigger function of jobs_slot_released: frees the slots the ended run took, its queue-wide slot (jobs.limit_slot)
-- and its group's (jobs.group_slot), each found by primary key and fenced by the run's lock token (a slot a later run
-- of the job took carries the later token, and a slot is freed once).
create function :PGONCE_SCHEMA._job_slot_released() returns trigger
language plpgsql as $$
begin
  if old.limit_slot > 0 then
    update :PGONCE_SCHEMA.limit_slots set job_id = null, lock_token = null
    where queue = old.queue and group_id = '' and slot = old.limit_slot
      and job_id = old.id and lock_token = old.lock_token;
  end if;
  if old.group_slot > 0 then
    update :PGONCE_SCHEMA.limit_slots set job_id = null, lock_token = null
    where queue = old.queue and group_id = old.group_id and slot = old.group_slot
      and job_id = old.id and lock_token = old.lock_token;
  end if;
  return null;
end
$$;

-- A run that took a slot leaves 'active', whatever ends it: failure, retry, cancel, give-back, lease rescue, timeout,
-- an operator's UPDATE, in the same transaction; a completion by sql/complete-jobs.sql frees its slots itself
-- (limit_slot and group_slot negated, so this WHEN is false).
create trigger jobs_slot_released after update of state on :PGONCE_SCHEMA.jobs
for each row when (old.state = 'active' and new.state <> 'active'
  and ((old.limit_slot > 0 and new.limit_slot > 0) or (old.group_slot > 0 and new.group_slot > 0)))
execute function :PGONCE_SCHEMA._job_slot_released();

-- An active job deleted (removeJob refuses it; an operator's DELETE does not).
create trigger jobs_slot_deleted after delete on :PGONCE_SCHEMA.jobs
for each row when (old.state = 'active' and (old.limit_slot > 0 or old.group_slot > 0))
execute function :PGONCE_SCHEMA._job_slot_released();

-- Waiting for a job: queue.waitForJob(id) marks the job it waits for (jobs.waited); when a marked job reaches a
-- terminal state, the jobs_waited trigger NOTIFYs its id on the schema's waiters channel (the workers' channel followed
-- by ':done', which no worker listens on). Only marked jobs fire it: the trigger's WHEN is a column test evaluated as
-- the row is updated, so a job nobody waits for queues no trigger event and sends no NOTIFY (docs/architecture.md,
-- "Waiting for a job").

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

-- =================================================================================================================
-- Adding jobs
-- =================================================================================================================
-- Every add, from TypeScript or SQL, reaches the same functions: _admit_one() decides one item that has a jobId, a key
-- or dependencies (a plain item is its INSERT alone) and every item of a batch, _add_jobs() adds a batch all or nothing, _lock_admission() takes an add's locks in one order. add_job() and add_jobs() are the SQL API
-- (docs/sql-and-migrations.md); queue.add and queue.addBulk send the statements of sql/ that call them, or, for plain
-- items, their own INSERTs with the same rules (docs/architecture.md lists the entry points).

-- One row of an add's answer: how item "ordinal" (1-based position in the caller's list) was decided, and the job
-- that now stands for it. On a rejection outcome is null and error names it (the job is the key's owner, if any).
create type :PGONCE_SCHEMA.admission as (
  ordinal  integer,
  outcome  text,
  error    :PGONCE_SCHEMA.admission_error,
  job      :PGONCE_SCHEMA.jobs
);

-- The admission rules for one add that has a jobId, a dedup key or dependencies: see docs/deduplication.md for the
-- table this implements. Never raises for a rejection: it comes back in "error", with the key's owner as the job, and
-- nothing is written. It is one of the three INSERTs of jobs (docs/architecture.md, "Entry points"): the one for an
-- add with anything to decide, and for every add through the SQL API. Its statements are planned with sequential scans
-- priced out (a key read went from ~4 to ~50 µs on a table analysed while tiny; see _prefer_index), a setting set and
-- restored around each call (~0.5 µs).
create function :PGONCE_SCHEMA._admit_one(
  p_queue text, p_name text, p_data jsonb, p_job_id text, p_dedup_id text, p_dedup_ttl_ms bigint,
  p_extend boolean, p_replace boolean, p_delay_ms bigint, p_priority integer, p_max_attempts integer,
  p_backoff jsonb, p_depends_on bigint[], p_trace_context text, p_timeout_ms integer,
  out outcome text, out error :PGONCE_SCHEMA.admission_error, out job :PGONCE_SCHEMA.jobs
)
language plpgsql volatile set enable_seqscan = off as $$
declare
  v_owner :PGONCE_SCHEMA.jobs;
  v_key :PGONCE_SCHEMA.dedup_keys;
  v_held boolean;
  v_blocked boolean := false;
  v_expires timestamptz;
begin
  if coalesce(p_extend, false) and p_dedup_ttl_ms is null and not coalesce(p_replace, false) then
    raise exception 'pgonce: dedup_extend needs dedup_ttl_ms' using errcode = '22023';
  end if;
  if cardinality(p_depends_on) > 0 then
    -- Lock the parents: one completing right now either commits first (and is read completed below), or waits for
    -- this add to commit and then promotes the new dependent (its trigger reads with a fresh snapshot).
    perform 1 from :PGONCE_SCHEMA.jobs where id = any(p_depends_on) order by id for share;
    if exists (select 1 from unnest(p_depends_on) d(id) where not exists (select 1 from :PGONCE_SCHEMA.jobs j where j.id = d.id)) then
      error := 'DEPENDENCY_NOT_FOUND';
      return;
    end if;
    v_blocked := exists (select 1 from :PGONCE_SCHEMA.jobs j where j.id = any(p_depends_on) and j.state <> 'completed');
  end if;

  loop
    -- jobId first: a live generation answers, whatever the key says.
    if p_job_id is not null then
      select * into v_owner from :PGONCE_SCHEMA.jobs where job_id = p_job_id and :PGONCE_SCHEMA._is_live(state);
      if found then
        outcome := 'duplicate-job-id';
        job := v_owner;
        return;
      end if;
    end if;

    v_held := false;
    v_key := null;
    if p_dedup_id is not null then
      -- A plain duplicate is answered without taking any lock.
      if not coalesce(p_replace, false) and not coalesce(p_extend, false) then
        select o.* into v_owner
        from :PGONCE_SCHEMA.dedup_keys k join :PGONCE_SCHEMA.jobs o on o.id = k.job_id
        where k.queue = p_queue and k.key = p_dedup_id and :PGONCE_SCHEMA._key_held(k.expires_at, o.state);
        if found then
          outcome := 'duplicate-key';
          job := v_owner;
          return;
        end if;
      end if;
      select * into v_key from :PGONCE_SCHEMA.dedup_keys where queue = p_queue and key = p_dedup_id for update;
      if found then
        select * into v_owner from :PGONCE_SCHEMA.jobs where id = v_key.job_id;
        v_held := :PGONCE_SCHEMA._key_held(v_key.expires_at, case when found then v_owner.state end);
      end if;
      if v_held and not coalesce(p_replace, false) then
        if coalesce(p_extend, false) then
          if not :PGONCE_SCHEMA._is_pending(v_owner.state) then
            error := 'EXTEND_NOT_PENDING';
            job := v_owner;
            return;
          end if;
          update :PGONCE_SCHEMA.dedup_keys set expires_at = now() + make_interval(secs => p_dedup_ttl_ms / 1000.0)
          where queue = p_queue and key = p_dedup_id;
          outcome := 'extended';
        else
          outcome := 'duplicate-key';
        end if;
        job := v_owner;
        return;
      end if;
      -- A live dependent keeps its parent from being superseded; so does the new job itself, if it would depend on
      -- the pending owner its replace deletes.
      if v_held and ((v_owner.id = any(p_depends_on) and :PGONCE_SCHEMA._is_pending(v_owner.state)) or exists (
        select 1 from :PGONCE_SCHEMA.job_dependencies d join :PGONCE_SCHEMA.jobs c on c.id = d.job_id
        where d.depends_on = v_owner.id and :PGONCE_SCHEMA._is_live(c.state)
      )) then
        error := 'REPLACE_HAS_DEPENDENTS';
        job := v_owner;
        return;
      end if;
    end if;

    -- One row: the same columns and rules as the plain adds' INSERTs (sql/add-plain-job.sql, add-plain-jobs.sql).
    insert into :PGONCE_SCHEMA.jobs
      (id, queue, name, data, job_id, dedup_key, state, run_at, priority, max_attempts, backoff, trace_context,
       timeout_ms)
    values (nextval(':PGONCE_SCHEMA.job_ids'), p_queue, p_name, coalesce(p_data, '{}'::jsonb), p_job_id, p_dedup_id,
      :PGONCE_SCHEMA._new_job_state(v_blocked, p_delay_ms), :PGONCE_SCHEMA._due_at(p_delay_ms),
      coalesce(p_priority, :PGONCE_SCHEMA._default_priority()),
      coalesce(p_max_attempts, :PGONCE_SCHEMA._default_max_attempts()), p_backoff, p_trace_context, p_timeout_ms)
    on conflict (job_id) where job_id is not null and :PGONCE_SCHEMA._is_live(state) do nothing
    returning * into job;
    continue when not found;  -- the jobId went live meanwhile: the loop answers with that generation

    if p_dedup_id is not null then
      v_expires := case when p_dedup_ttl_ms is null then null else now() + make_interval(secs => p_dedup_ttl_ms / 1000.0) end;
      if v_key.queue is null then
        insert into :PGONCE_SCHEMA.dedup_keys (queue, key, job_id, expires_at)
        values (p_queue, p_dedup_id, job.id, v_expires)
        on conflict do nothing;
        if not found then
          -- Another add took the key first: undo this insert and decide again.
          delete from :PGONCE_SCHEMA.jobs where id = job.id;
          job := null;
          continue;
        end if;
      else
        -- Move the key before removing its old owner: the owner's deletion takes its keys with it.
        update :PGONCE_SCHEMA.dedup_keys set job_id = job.id, expires_at = v_expires
        where queue = p_queue and key = p_dedup_id;
        if v_held then
          -- A pending owner (even one a worker claimed ahead) is superseded; a running one finishes under its lease.
          delete from :PGONCE_SCHEMA.jobs where id = v_owner.id and :PGONCE_SCHEMA._is_pending(state);
        end if;
      end if;
    end if;

    -- Every edge is kept, blocking or not: a live dependent keeps its parents from being replaced or pruned.
    if cardinality(p_depends_on) > 0 then
      insert into :PGONCE_SCHEMA.job_dependencies (job_id, depends_on)
      select job.id, d from unnest(p_depends_on) d on conflict do nothing;
      update :PGONCE_SCHEMA.jobs set has_dependents = true where id = any(p_depends_on) and not has_dependents;
      -- A parent that already failed or was cancelled can never complete: the new job fails at once, as its waiting
      -- siblings did when that parent ended, naming the first such parent of its dependsOn (the jobs_finished trigger
      -- then releases its no-TTL key).
      if exists (select 1 from :PGONCE_SCHEMA.jobs
                 where id = any(p_depends_on) and :PGONCE_SCHEMA._is_terminal(state) and state <> 'completed') then
        update :PGONCE_SCHEMA.jobs j set state = 'failed', finished_at = now(),
          last_error = format('dependency %s ended %s', p.id, p.state)
        from (select p.id, p.state from unnest(p_depends_on) with ordinality d(id, n)
              join :PGONCE_SCHEMA.jobs p on p.id = d.id
              where :PGONCE_SCHEMA._is_terminal(p.state) and p.state <> 'completed'
              order by d.n limit 1) p
        where j.id = job.id
        returning j.* into job;
      end if;
    end if;
    outcome := case when v_held then 'replaced' else 'added' end;
    return;
  end loop;
end
$$;

-- Locks, before a batch decides anything, the rows its items may change, in the order a worker's statements take
-- them: first the job rows in ascending id, the pending owners of the keys it replaces (FOR UPDATE: they are deleted)
-- and its dependsOn parents (FOR SHARE, as _admit_one takes them), then the dedup_keys rows of the keys it replaces or
-- extends, in their owners' id order. A worker's multi-row statements lock job rows in ascending id, and a
-- completion's jobs_finished trigger then deletes the finished jobs' no-TTL keys; items locking in input order
-- deadlocked with them (test/mechanisms/queue.add-bulk-lock-order.test.ts). An owner read here may change before its
-- item is decided (a single add takes no batch lock): the items still decide on what they read then; these locks only
-- set the order.
create function :PGONCE_SCHEMA._lock_batch_rows(
  p_queue text, p_dedup_ids text[], p_extends boolean[], p_replaces boolean[], p_depends_on text[]
) returns void
language plpgsql volatile as $$
declare
  r record;
begin
  for r in
    select w.id, bool_or(w.owner) as owner
    from (select k.job_id as id, true as owner
          from unnest(p_dedup_ids, p_replaces) i(d, rep)
          join :PGONCE_SCHEMA.dedup_keys k on k.queue = p_queue and k.key = i.d
          where i.rep
          union all
          select p.id, false from unnest(p_depends_on) d(ids), unnest(d.ids::bigint[]) p(id)) w
    group by w.id
    order by w.id
  loop
    if r.owner then
      perform 1 from :PGONCE_SCHEMA.jobs where id = r.id and :PGONCE_SCHEMA._is_pending(state) for update;
    else
      perform 1 from :PGONCE_SCHEMA.jobs where id = r.id for share;
    end if;
  end loop;
  perform 1 from :PGONCE_SCHEMA.dedup_keys k
  where k.queue = p_queue
    and k.key in (select i.d from unnest(p_dedup_ids, p_extends, p_replaces) i(d, x, rep) where i.x or i.rep)
  order by k.job_id, k.key
  for update;
end
$$;

-- The locks an add takes before it decides, the same for a single add and a batch (a single replace that locked the key
-- row before its owner deadlocked against a batch: test/mechanisms/queue.add-lock-order.test.ts): first the sorted
-- advisory locks on its keys and jobIds (when two items could meet in one batch, or an item extends or replaces its
-- key: the owner read before its row is locked then cannot change under a concurrent replace), then, when an item
-- extends, replaces or depends, its rows in the workers' order (_lock_batch_rows()). Planned with sequential scans
-- priced out, as _admit_one().
create function :PGONCE_SCHEMA._lock_admission(p_queue text, p_job_ids text[], p_dedup_ids text[], p_extends boolean[],
  p_replaces boolean[], p_depends_on text[]) returns void
language plpgsql volatile set enable_seqscan = off as $$
declare
  v_moves boolean := true = any(p_extends) or true = any(p_replaces);
begin
  perform pg_advisory_xact_lock(hashtextextended(:PGONCE_CHANNEL || ':admit:' || l.k, 0))
  from (
    select distinct k from (
      select 'k:' || p_queue || ':' || d as k from unnest(p_dedup_ids) d where d is not null
      union all
      select 'j:' || j from unnest(p_job_ids) j where j is not null) x
    order by k
  ) l
  where coalesce(v_moves, false)
     or (select count(*) from unnest(p_dedup_ids) d where d is not null)
      + (select count(*) from unnest(p_job_ids) j where j is not null) > 1;
  if coalesce(v_moves, false) or exists (select 1 from unnest(p_depends_on) d where d is not null) then
    perform :PGONCE_SCHEMA._lock_batch_rows(p_queue, p_dedup_ids, p_extends, p_replaces, p_depends_on);
  end if;
end
$$;

-- Admits a batch given as parallel arrays, every item with _admit_one() in array order, so that repeats of a jobId or
-- key are answered as if added one after another; it stops at the first rejected item, whose answer comes last. Writes
-- what it admitted: the caller undoes it on a rejection. A plain item costs a call (a 1,000-item add_jobs() of plain
-- items ~75 ms in a probe on a 2-core VM); queue.addBulk of plain items takes sql/add-plain-jobs.sql instead.
create function :PGONCE_SCHEMA._admit_batch(
  p_queue text, p_names text[], p_datas jsonb[], p_job_ids text[], p_dedup_ids text[], p_dedup_ttls_ms bigint[],
  p_extends boolean[], p_replaces boolean[], p_delays_ms bigint[], p_priorities integer[], p_max_attempts integer[],
  p_backoffs jsonb[], p_depends_on text[], p_trace_contexts text[], p_timeouts_ms integer[]
) returns :PGONCE_SCHEMA.admission[]
language plpgsql volatile as $$
declare
  v_answers :PGONCE_SCHEMA.admission[] := '{}';
  v_one record;
  i integer;
begin
  for i in 1 .. coalesce(cardinality(p_names), 0) loop
    select * into v_one from :PGONCE_SCHEMA._admit_one(p_queue, p_names[i], p_datas[i], p_job_ids[i], p_dedup_ids[i],
      p_dedup_ttls_ms[i], coalesce(p_extends[i], false), coalesce(p_replaces[i], false), p_delays_ms[i],
      p_priorities[i], p_max_attempts[i], p_backoffs[i], p_depends_on[i]::bigint[], p_trace_contexts[i],
      p_timeouts_ms[i]);
    -- An element assigned in place (an append would copy the array each time).
    v_answers[i] := row(i, v_one.outcome, v_one.error, v_one.job):::PGONCE_SCHEMA.admission;
    exit when v_one.error is not null;
  end loop;
  return v_answers;
end
$$;

-- Adds a batch given as parallel arrays (see _admit_batch), all or nothing: a rejected item undoes the whole batch
-- and comes back as the only row; "ordinal" is each item's 1-based position. Items are decided in array order after
-- _lock_admission(). Wakes the queue's idle workers once, if it queued anything.
create function :PGONCE_SCHEMA._add_jobs(
  p_queue text, p_names text[], p_datas jsonb[], p_job_ids text[], p_dedup_ids text[], p_dedup_ttls_ms bigint[],
  p_extends boolean[], p_replaces boolean[], p_delays_ms bigint[], p_priorities integer[], p_max_attempts integer[],
  p_backoffs jsonb[], p_depends_on text[], p_trace_contexts text[], p_timeouts_ms integer[] default null
) returns setof :PGONCE_SCHEMA.admission
language plpgsql volatile as $$
declare
  v_answers :PGONCE_SCHEMA.admission[];
  v_last :PGONCE_SCHEMA.admission;
begin
  perform :PGONCE_SCHEMA._lock_admission(p_queue, p_job_ids, p_dedup_ids, p_extends, p_replaces, p_depends_on);
  -- Only extend, replace and dependsOn can be rejected, and a rejected item writes nothing itself: the savepoint
  -- (a subtransaction) is paid only by batches in which an earlier item may have to be undone.
  if coalesce(cardinality(p_names), 0) > 1 and (true = any(p_extends) or true = any(p_replaces)
      or exists (select 1 from unnest(p_depends_on) d where d is not null)) then
    begin
      v_answers := :PGONCE_SCHEMA._admit_batch(p_queue, p_names, p_datas, p_job_ids, p_dedup_ids, p_dedup_ttls_ms,
        p_extends, p_replaces, p_delays_ms, p_priorities, p_max_attempts, p_backoffs, p_depends_on, p_trace_contexts,
        p_timeouts_ms);
      v_last := v_answers[cardinality(v_answers)];
      if v_last.error is not null then
        raise exception using errcode = 'PO001', message = 'pgonce: batch item rejected';
      end if;
    exception when sqlstate 'PO001' then
      -- Every item of the batch is undone; the caller's transaction stays usable.
      return next v_last;
      return;
    end;
  else
    v_answers := :PGONCE_SCHEMA._admit_batch(p_queue, p_names, p_datas, p_job_ids, p_dedup_ids, p_dedup_ttls_ms,
      p_extends, p_replaces, p_delays_ms, p_priorities, p_max_attempts, p_backoffs, p_depends_on, p_trace_contexts,
      p_timeouts_ms);
    v_last := v_answers[cardinality(v_answers)];
    if v_last.error is not null then
      return next v_last;
      return;
    end if;
  end if;

  if exists (select 1 from unnest(v_answers) a
             where a.outcome in ('added', 'replaced') and :PGONCE_SCHEMA._is_queued((a.job).state)) then
    perform :PGONCE_SCHEMA._wake(p_queue);
  end if;
  return query select * from unnest(v_answers) order by 1;
end
$$;

-- An add's answer, the job it inserted (added, replaced) put in group p_group_id (null: none, the answer as it is).
-- add_job() and add_jobs() admit through _admit_one(), which knows no group: the group is set on the row it inserted,
-- in the same transaction, so only an add with a group pays for it. A duplicate's owner keeps its own group.
create function :PGONCE_SCHEMA._group_admitted(a :PGONCE_SCHEMA.admission, p_group_id text)
returns :PGONCE_SCHEMA.admission
language plpgsql volatile as $$
declare
  v_job :PGONCE_SCHEMA.jobs;
begin
  if p_group_id is not null and a.outcome in ('added', 'replaced') then
    update :PGONCE_SCHEMA.jobs set group_id = p_group_id where id = (a.job).id returning * into v_job;
    a.job := v_job;
  end if;
  return a;
end
$$;

-- Adds one job with the rules of docs/deduplication.md: the SQL face of queue.add, for triggers, psql and any client.
-- A rejection (error EXTEND_NOT_PENDING, REPLACE_HAS_DEPENDENTS, DEPENDENCY_NOT_FOUND) writes nothing; it raises
-- SQLSTATE PO001 unless raise_rejection is false, in which case it comes back in the error column. run_at is an
-- absolute due time instead of delay_ms (both: SQLSTATE 22023). timeout_ms: how long a run may take, in ms (> 0, the
-- CHECK of jobs.timeout_ms; null: the worker's timeoutMs, if any). group_id: the job's group (null: none; 1 to 128
-- characters, else SQLSTATE 22023).
create function :PGONCE_SCHEMA.add_job(
  queue text, name text, data jsonb default '{}'::jsonb, job_id text default null,
  dedup_id text default null, dedup_ttl_ms bigint default null,
  dedup_extend boolean default false, dedup_replace boolean default false,
  delay_ms bigint default null, priority integer default null,
  max_attempts integer default null, backoff jsonb default null,
  depends_on bigint[] default null, raise_rejection boolean default true, trace_context text default null,
  run_at timestamptz default null, timeout_ms integer default null, group_id text default null
) returns :PGONCE_SCHEMA.admission
language plpgsql volatile as $$
declare
  v_answer :PGONCE_SCHEMA.admission;
begin
  if $9 is not null and $16 is not null then
    raise exception 'pgonce: give delay_ms or run_at, not both' using errcode = '22023';
  end if;
  if $18 = '' or length($18) > 128 then
    raise exception 'pgonce: group_id must be 1 to 128 characters' using errcode = '22023';
  end if;
  -- One item needs no savepoint; only an extend, a replace or a dependency takes locks first. A plain item goes
  -- through _admit_one() too: with no jobId, key or dependency it is its INSERT alone.
  if coalesce($7, false) or coalesce($8, false) or $13 is not null then
    perform :PGONCE_SCHEMA._lock_admission($1, array[$4], array[$5], array[coalesce($7, false)],
      array[coalesce($8, false)], array[$13::text]);
  end if;
  select 1, a.outcome, a.error, a.job into v_answer from :PGONCE_SCHEMA._admit_one($1, $2, $3, $4, $5, $6,
    coalesce($7, false), coalesce($8, false), coalesce($9, :PGONCE_SCHEMA._delay_until($16)), $10, $11, $12, $13, $15,
    $17) a;
  if $18 is not null then
    v_answer := :PGONCE_SCHEMA._group_admitted(v_answer, $18);
  end if;
  if v_answer.outcome in ('added', 'replaced') and :PGONCE_SCHEMA._is_queued((v_answer.job).state) then
    perform :PGONCE_SCHEMA._wake($1);
  end if;
  if v_answer.error is not null and raise_rejection then
    raise exception 'pgonce: %', case v_answer.error
        when 'EXTEND_NOT_PENDING' then 'Duplicate unique_key (extended TTL): the key''s owner is no longer pending'
        when 'REPLACE_HAS_DEPENDENTS' then 'cannot replace the key''s owner: a live job depends on it'
        else 'a dependency does not exist' end
      using errcode = 'PO001', detail = v_answer.error::text;
  end if;
  return v_answer;
end
$$;

-- addBulk from SQL: items is a jsonb array of objects with keys name, data, jobId, dedupId, dedupTtlMs, extend,
-- replace, delayMs, runAt (a timestamptz string, or epoch ms), priority, attempts, backoff, dependsOn (an array of
-- job ids), timeoutMs, groupId (a string of 1 to 128 characters). An item that is not an object, has any other key (a
-- typo must never drop a guarantee silently), has both delayMs and runAt, or a groupId that is not such a string, is
-- refused with SQLSTATE 22023 and nothing is added. All or nothing, as _add_jobs: a rejected item raises PO001
-- (detail: its error), unless raise_rejection is false, in which case it comes back as the only row.
create function :PGONCE_SCHEMA.add_jobs(queue text, items jsonb, raise_rejection boolean default true)
returns setof :PGONCE_SCHEMA.admission
language plpgsql volatile as $$
declare
  v_bad jsonb;
  v_answer :PGONCE_SCHEMA.admission;
begin
  select e into v_bad from jsonb_array_elements(items) e
  where jsonb_typeof(e) <> 'object'
     or e - '{name,data,jobId,dedupId,dedupTtlMs,extend,replace,delayMs,runAt,priority,attempts,backoff,dependsOn,timeoutMs,groupId}'::text[] <> '{}'::jsonb
  limit 1;
  if found then
    raise exception 'pgonce: add_jobs() items are objects with the keys name, data, jobId, dedupId, dedupTtlMs, extend, replace, delayMs, runAt, priority, attempts, backoff, dependsOn, timeoutMs, groupId (item: %)',
      left(v_bad::text, 200) using errcode = '22023';
  end if;
  select e into v_bad from jsonb_array_elements(items) e where e ? 'delayMs' and e ? 'runAt' limit 1;
  if found then
    raise exception 'pgonce: add_jobs() items give delayMs or runAt, not both (item: %)', left(v_bad::text, 200)
      using errcode = '22023';
  end if;
  select e into v_bad from jsonb_array_elements(items) e
  where e ? 'groupId' and (jsonb_typeof(e->'groupId') <> 'string' or e->>'groupId' = '' or length(e->>'groupId') > 128)
  limit 1;
  if found then
    raise exception 'pgonce: add_jobs() items give a groupId of 1 to 128 characters (item: %)', left(v_bad::text, 200)
      using errcode = '22023';
  end if;
  for v_answer in
    select (g.a).* from (
      select array_agg(e->>'name' order by o) n, array_agg(e->'data' order by o) d, array_agg(e->>'jobId' order by o) j,
        array_agg(e->>'dedupId' order by o) k, array_agg((e->>'dedupTtlMs')::bigint order by o) t,
        array_agg((e->>'extend')::boolean order by o) x, array_agg((e->>'replace')::boolean order by o) r,
        array_agg(coalesce((e->>'delayMs')::bigint, :PGONCE_SCHEMA._delay_until(case jsonb_typeof(e->'runAt')
            when 'number' then to_timestamp((e->>'runAt')::float8 / 1000) else (e->>'runAt')::timestamptz end))
          order by o) dl,
        array_agg((e->>'priority')::integer order by o) p,
        array_agg((e->>'attempts')::integer order by o) as at, array_agg(e->'backoff' order by o) b,
        array_agg(case when e ? 'dependsOn' then translate((e->'dependsOn')::text, '[]"', '{}') end order by o) dep,
        array_agg((e->>'timeoutMs')::integer order by o) tm, array_agg(e->>'groupId' order by o) gr
      from jsonb_array_elements(items) with ordinality e(e, o)
    ) i, :PGONCE_SCHEMA._add_jobs($1, i.n, i.d, i.j, i.k, i.t, i.x, i.r, i.dl, i.p, i.at, i.b, i.dep, null, i.tm) a,
      lateral (select case when i.gr[a.ordinal] is null then a
                           else :PGONCE_SCHEMA._group_admitted(a, i.gr[a.ordinal]) end as a offset 0) g
  loop
    if v_answer.error is not null and raise_rejection then
      raise exception 'pgonce: batch item % rejected: %', v_answer.ordinal, v_answer.error
        using errcode = 'PO001', detail = v_answer.error::text;
    end if;
    return next v_answer;
  end loop;
end
$$;

-- The answer to an add as queue.add and queue.addBulk read it, in four columns: how the item was decided, and the
-- job. A job this call inserted (added, replaced) comes back as the columns the caller cannot know, comma-separated in
-- one text (id, state, priority, max_attempts, run_at in ms, created_at in ms); any other job (a duplicate's owner, an
-- extended one, a rejection's owner) whole, as JSON text with its id as a string. Every column of an answer costs the
-- client and the server about a µs per statement (its description is sent and read with every execution).
-- Set-returning, so that the planner inlines it.
create function :PGONCE_SCHEMA._answer(a :PGONCE_SCHEMA.admission)
returns table (ordinal integer, outcome text, error text, job text)
language sql immutable rows 1 as $$
  select a.ordinal, a.outcome, a.error::text,
    case when a.outcome in ('added', 'replaced')
      then concat_ws(',', (a.job).id, (a.job).state, (a.job).priority, (a.job).max_attempts,
        (extract(epoch from (a.job).run_at) * 1000)::float8, (extract(epoch from (a.job).created_at) * 1000)::float8)
      else (to_jsonb(a.job) || jsonb_build_object('id', (a.job).id::text))::text end
$$;

-- =================================================================================================================
-- What a worker receives
-- =================================================================================================================

-- A job as a worker receives it when it claims it: what the handler sees, the lock token that fences
-- every later change, and its times in ms (float8 is cheaper for the client to read than timestamptz). Set-returning
-- SQL, so that the planner inlines it into the statements that use it.
create function :PGONCE_SCHEMA._as_claimed(j :PGONCE_SCHEMA.jobs)
returns table (id bigint, queue text, name text, job_id text, data jsonb, state text, priority integer,
  attempts integer, max_attempts integer, backoff jsonb, dedup_key text, lock_token uuid, last_error text,
  error_stack text, progress jsonb, trace_context text, run_at_ms float8, created_at_ms float8)
language sql immutable rows 1 as $$
  select j.id, j.queue, j.name, j.job_id, j.data, j.state, j.priority, j.attempts, j.max_attempts, j.backoff,
    j.dedup_key, j.lock_token, j.last_error, j.error_stack, j.progress, j.trace_context,
    (extract(epoch from j.run_at) * 1000)::float8, (extract(epoch from j.created_at) * 1000)::float8
$$;

-- =================================================================================================================
-- The Redis layer's invalidation
-- =================================================================================================================
-- Postgres says when a fact the optional Redis cache may hold has ended, whoever ended it (pgonce with or without
-- Redis, psql, another program). A change that ends a cacheable fact notes its bucket (see cache_epochs) in the
-- transaction (a transaction-local setting); when the transaction commits, a deferred trigger bumps every noted
-- bucket in bucket order (row locks taken only at commit and in one order: no new deadlock for the transactions that
-- end facts) and NOTIFYs '!cache <bucket> <epoch>' while a cache listener holds the listener slot.
--
-- Cacheable facts, and what ends them:
--   a dedup key held with a TTL   deleted, moved to another job or key, or its expiry brought forward or removed
--   a processed_effects row       deleted before ledger retention could prune it; its recorded_at moved earlier; the
--                                 retention set or shortened (every bucket)
--   a done execution claim        deleted or changed while unexpired, or its expiry brought forward
--   any of the three tables       TRUNCATE (every bucket)
-- Expired keys and claims, and ledger rows past retention, end nothing: entries carry their fact's end and are not
-- answered past it.

-- The bucket of a cache identity: the first byte of its SHA-256 in UTF-8 (src/cache/keys.ts computes the same).
create function :PGONCE_SCHEMA._cache_bucket(p_ident text) returns integer
language sql stable parallel safe as $$
  select get_byte(sha256(convert_to(p_ident, 'UTF8')), 0)
$$;

-- A cache listener holds this advisory lock shared for its session; a bump NOTIFYs only while one does.
create function :PGONCE_SCHEMA._cache_listener_key() returns bigint
language sql immutable parallel safe as $$
  select hashtextextended(:PGONCE_CHANNEL || ':cache-listener', 0)
$$;

-- The transaction-local setting listing the buckets to bump at commit, as ',3,17,'.
create function :PGONCE_SCHEMA._cache_pending_setting() returns text
language sql immutable parallel safe as $$
  select 'pgonce_cache.' || substr(:PGONCE_CHANNEL, 8)
$$;

-- Notes bucket p_bucket (null: every bucket) for the bump at commit.
create function :PGONCE_SCHEMA._cache_note(p_bucket integer) returns void
language plpgsql as $$
declare
  v_setting text := :PGONCE_SCHEMA._cache_pending_setting();
  v_pending text := coalesce(nullif(current_setting(v_setting, true), ''), ',');
begin
  if p_bucket is null then
    v_pending := ',' || (select string_agg(b::text, ',') from generate_series(0, 255) b) || ',';
  elsif position(',' || p_bucket || ',' in v_pending) = 0 then
    v_pending := v_pending || p_bucket || ',';
  else
    return;
  end if;
  perform set_config(v_setting, v_pending, true);
end
$$;

-- Bumps one bucket: a new epoch, never below the clock in microseconds (so that after a restore from backup an epoch
-- is never used twice), and a NOTIFY unless no cache listener holds the slot. The exclusive try-lock, once taken, is
-- held until commit: a listener starting meanwhile waits for this commit before it reads the epochs.
create function :PGONCE_SCHEMA._cache_bump(p_bucket integer) returns bigint
language plpgsql as $$
declare
  v_epoch bigint;
begin
  update :PGONCE_SCHEMA.cache_epochs
  set epoch = greatest(epoch + 1, (extract(epoch from clock_timestamp()) * 1000000)::bigint)
  where bucket = p_bucket
  returning epoch into v_epoch;
  if not pg_try_advisory_xact_lock(:PGONCE_SCHEMA._cache_listener_key()) then
    perform pg_notify(:PGONCE_CHANNEL, '!cache ' || p_bucket || ' ' || v_epoch);
  end if;
  return v_epoch;
end
$$;

-- Deferred (at commit): bumps every noted bucket once, in bucket order. The first firing of a transaction does them all.
create function :PGONCE_SCHEMA._cache_flush() returns trigger
language plpgsql as $$
declare
  v_setting text := :PGONCE_SCHEMA._cache_pending_setting();
  v_pending text := coalesce(current_setting(v_setting, true), '');
  v_bucket integer;
begin
  if v_pending not in ('', ',') then
    perform set_config(v_setting, ',', true);
    for v_bucket in
      select distinct b::integer from unnest(string_to_array(trim(both ',' from v_pending), ',')) b order by 1
    loop
      perform :PGONCE_SCHEMA._cache_bump(v_bucket);
    end loop;
  end if;
  return null;
end
$$;

-- Bumps every bucket at once (and NOTIFYs '!cache *': listeners read every epoch again), above p_floor. For operators
-- after restoring pgonce's schema from a backup into a running server; pgonce calls it itself when it finds the
-- server restarted or an epoch gone backwards.
create function :PGONCE_SCHEMA.invalidate_cache(p_floor bigint default 0) returns bigint
language plpgsql as $$
declare
  v_epoch bigint;
begin
  perform 1 from :PGONCE_SCHEMA.cache_epochs order by bucket for update;
  update :PGONCE_SCHEMA.cache_epochs
  set epoch = greatest(epoch + 1, (extract(epoch from clock_timestamp()) * 1000000)::bigint, coalesce(p_floor, 0) + 1);
  select max(epoch) into v_epoch from :PGONCE_SCHEMA.cache_epochs;
  perform pg_notify(:PGONCE_CHANNEL, '!cache *');
  return v_epoch;
end
$$;

-- What the cache needs to know after an add (sql/add-job-cached.sql), read after add_job() in one fresh snapshot:
-- whether job p_job_id (the one the answer names) holds the key with a TTL and until when, the bucket's epoch, whether
-- this transaction bumps the bucket at commit, and the database clock.
create function :PGONCE_SCHEMA._cache_key_state(p_queue text, p_key text, p_job_id bigint,
  out owned boolean, out key_expires_ms double precision, out epoch bigint, out will_bump boolean, out now_ms double precision)
returns record
language plpgsql volatile as $$
declare
  v_bucket integer := :PGONCE_SCHEMA._cache_bucket('k ' || p_queue || ' ' || p_key);
begin
  select k.job_id is not null, (extract(epoch from k.expires_at) * 1000)::float8, c.epoch,
    position(',' || v_bucket || ',' in coalesce(current_setting(:PGONCE_SCHEMA._cache_pending_setting(), true), '')) > 0,
    (extract(epoch from clock_timestamp()) * 1000)::float8
  into owned, key_expires_ms, epoch, will_bump, now_ms
  from :PGONCE_SCHEMA.cache_epochs c
  left join :PGONCE_SCHEMA.dedup_keys k
    on k.queue = p_queue and k.key = p_key and k.job_id = p_job_id and k.expires_at > now()
  where c.bucket = v_bucket;
end
$$;

-- The trigger function of every end below: notes the bucket of the fact the OLD row stood for (on settings: every
-- bucket).
create function :PGONCE_SCHEMA._cache_fact_ended() returns trigger
language plpgsql as $$
begin
  if tg_table_name = 'dedup_keys' then
    perform :PGONCE_SCHEMA._cache_note(:PGONCE_SCHEMA._cache_bucket('k ' || old.queue || ' ' || old.key));
  elsif tg_table_name = 'processed_effects' then
    perform :PGONCE_SCHEMA._cache_note(:PGONCE_SCHEMA._cache_bucket('e ' || old.effect_key));
  elsif tg_table_name = 'execution_claims' then
    perform :PGONCE_SCHEMA._cache_note(:PGONCE_SCHEMA._cache_bucket('c ' || old.key));
  else
    perform :PGONCE_SCHEMA._cache_note(null);
  end if;
  return null;
end
$$;

-- dedup_keys: a held TTL key ends. Each end has a trigger that notes its bucket and a deferred one that bumps at
-- commit.
create trigger dedup_keys_cache_deleted after delete on :PGONCE_SCHEMA.dedup_keys
  for each row when (old.expires_at > now())
  execute function :PGONCE_SCHEMA._cache_fact_ended();
create constraint trigger dedup_keys_cache_deleted_flush after delete on :PGONCE_SCHEMA.dedup_keys
  deferrable initially deferred
  for each row when (old.expires_at > now())
  execute function :PGONCE_SCHEMA._cache_flush();
create trigger dedup_keys_cache_changed after update of queue, key, job_id, expires_at on :PGONCE_SCHEMA.dedup_keys
  for each row when (old.expires_at > now() and (new.queue <> old.queue or new.key <> old.key or new.job_id <> old.job_id
    or new.expires_at is null or new.expires_at < old.expires_at))
  execute function :PGONCE_SCHEMA._cache_fact_ended();
create constraint trigger dedup_keys_cache_changed_flush after update of queue, key, job_id, expires_at on :PGONCE_SCHEMA.dedup_keys
  deferrable initially deferred
  for each row when (old.expires_at > now() and (new.queue <> old.queue or new.key <> old.key or new.job_id <> old.job_id
    or new.expires_at is null or new.expires_at < old.expires_at))
  execute function :PGONCE_SCHEMA._cache_flush();

-- processed_effects: a ledger row ends before retention could prune it (sql/prune-ledger.sql's own cutoff).
create function :PGONCE_SCHEMA._cache_effect_unprunable(p_recorded_at timestamptz) returns boolean
language sql stable as $$
  select coalesce((select p_recorded_at >= now() - make_interval(secs => s.ledger_retention_ms / 1000.0)
                   from :PGONCE_SCHEMA.settings s), true)
$$;

create trigger processed_effects_cache_deleted after delete on :PGONCE_SCHEMA.processed_effects
  for each row when (:PGONCE_SCHEMA._cache_effect_unprunable(old.recorded_at))
  execute function :PGONCE_SCHEMA._cache_fact_ended();
create constraint trigger processed_effects_cache_deleted_flush after delete on :PGONCE_SCHEMA.processed_effects
  deferrable initially deferred
  for each row when (:PGONCE_SCHEMA._cache_effect_unprunable(old.recorded_at))
  execute function :PGONCE_SCHEMA._cache_flush();
create trigger processed_effects_cache_changed after update of effect_key, recorded_at on :PGONCE_SCHEMA.processed_effects
  for each row when (new.effect_key <> old.effect_key or new.recorded_at < old.recorded_at)
  execute function :PGONCE_SCHEMA._cache_fact_ended();
create constraint trigger processed_effects_cache_changed_flush after update of effect_key, recorded_at on :PGONCE_SCHEMA.processed_effects
  deferrable initially deferred
  for each row when (new.effect_key <> old.effect_key or new.recorded_at < old.recorded_at)
  execute function :PGONCE_SCHEMA._cache_flush();

-- settings: a ledger retention set or changed (shortened, or set where there was none, makes rows prunable sooner
-- than their entries say; a longer one is bumped too, harmlessly: the trigger cannot compare with OLD on insert).
create trigger settings_cache_retention after insert or update of ledger_retention_ms on :PGONCE_SCHEMA.settings
  for each row when (new.ledger_retention_ms is not null)
  execute function :PGONCE_SCHEMA._cache_fact_ended();
create constraint trigger settings_cache_retention_flush after insert or update of ledger_retention_ms on :PGONCE_SCHEMA.settings
  deferrable initially deferred
  for each row when (new.ledger_retention_ms is not null)
  execute function :PGONCE_SCHEMA._cache_flush();

-- execution_claims: a done marker ends while unexpired.
create trigger execution_claims_cache_deleted after delete on :PGONCE_SCHEMA.execution_claims
  for each row when (old.state = 'done' and (old.expires_at is null or old.expires_at > now()))
  execute function :PGONCE_SCHEMA._cache_fact_ended();
create constraint trigger execution_claims_cache_deleted_flush after delete on :PGONCE_SCHEMA.execution_claims
  deferrable initially deferred
  for each row when (old.state = 'done' and (old.expires_at is null or old.expires_at > now()))
  execute function :PGONCE_SCHEMA._cache_flush();
create trigger execution_claims_cache_changed after update on :PGONCE_SCHEMA.execution_claims
  for each row when (old.state = 'done' and (old.expires_at is null or old.expires_at > now())
    and (new.key <> old.key or new.state <> 'done'
      or (new.expires_at is not null and (old.expires_at is null or new.expires_at < old.expires_at))))
  execute function :PGONCE_SCHEMA._cache_fact_ended();
create constraint trigger execution_claims_cache_changed_flush after update on :PGONCE_SCHEMA.execution_claims
  deferrable initially deferred
  for each row when (old.state = 'done' and (old.expires_at is null or old.expires_at > now())
    and (new.key <> old.key or new.state <> 'done'
      or (new.expires_at is not null and (old.expires_at is null or new.expires_at < old.expires_at))))
  execute function :PGONCE_SCHEMA._cache_flush();

-- TRUNCATE of any of the three tables (also through TRUNCATE jobs CASCADE) ends everything.
create function :PGONCE_SCHEMA._cache_truncated() returns trigger
language plpgsql as $$
begin
  perform :PGONCE_SCHEMA.invalidate_cache();
  return null;
end
$$;

create trigger dedup_keys_cache_truncated after truncate on :PGONCE_SCHEMA.dedup_keys
  for each statement execute function :PGONCE_SCHEMA._cache_truncated();
create trigger processed_effects_cache_truncated after truncate on :PGONCE_SCHEMA.processed_effects
  for each statement execute function :PGONCE_SCHEMA._cache_truncated();
create trigger execution_claims_cache_truncated after truncate on :PGONCE_SCHEMA.execution_claims
  for each statement execute function :PGONCE_SCHEMA._cache_truncated();

-- The ends of cached facts that Redis never hears of: a removal by a process without
-- `redis`, SQL by hand (docs/redis.md, "How it stays right"; the argument is at the top of src/cache/invalidation.ts).
--
-- A process answers from Redis only while two leases of its cache listener last (src/cache/listener-lease.ts): it has
-- heard, within the last 100 ms (_cache_settle_interval_ms), a heartbeat NOTIFY it sent itself, so it has heard every
-- NOTIFY committed before that heartbeat was sent; and its row in cache_listeners, refreshed every 10 s, has not run
-- out. A change that ends a cached fact therefore only has to wait 100 ms after its commit, while any row lasts, for no
-- process to answer that fact again. pgonce's statements that may end a fact say how long in their answer
-- (_cache_settle_ms), and wait after their commit; wait_for_caches() and the procedure remove_dedup_key() do it for SQL.

create table :PGONCE_SCHEMA.cache_listeners (
  listener       text primary key,
  trusted_until  timestamptz not null
);
comment on table :PGONCE_SCHEMA.cache_listeners is
  'The processes whose cache listener may answer from Redis, each at most until trusted_until (src/cache/listener-lease.ts): while a row lasts, a change that ends a cached fact waits 100 ms after its commit before it reports success.';

-- How long after a commit every process has heard it or stopped answering from Redis (src/cache/listener-lease.ts
-- trusts a heartbeat for no longer).
create function :PGONCE_SCHEMA._cache_settle_interval_ms() returns integer
language sql immutable parallel safe as $$
  select 100
$$;

-- Whether any process may be answering from Redis now: a row of cache_listeners whose lease lasts.
create function :PGONCE_SCHEMA._cache_leases_last() returns boolean
language sql stable as $$
  select exists (select 1 from :PGONCE_SCHEMA.cache_listeners where trusted_until > now())
$$;

-- Taken shared by a statement that decides whether its caller waits (_cache_settle_ms), until it commits. A cache
-- listener takes it exclusively once, after writing its row and before reading the epochs (sql/cache-listen.sql): a
-- listener that statement could not see reads the epochs after its commit, so it never needs the wait.
create function :PGONCE_SCHEMA._cache_settle_key() returns bigint
language sql immutable parallel safe as $$
  select hashtextextended(:PGONCE_CHANNEL || ':cache-settle', 0)
$$;

-- Whether this transaction bumps a bucket at commit: it ended a cached fact (read once the row triggers have fired,
-- e.g. after a function that made the change).
create function :PGONCE_SCHEMA._cache_bumps_pending() returns boolean
language sql volatile as $$
  select coalesce(current_setting(:PGONCE_SCHEMA._cache_pending_setting(), true), '') not in ('', ',')
$$;

-- How long the caller waits after this transaction commits before it reports success: the settle interval when
-- p_ends (this transaction ends a cached fact at commit) while any listener's lease lasts, else 0. For statements of
-- their own transaction only: the lock it takes lasts until the commit.
create function :PGONCE_SCHEMA._cache_settle_ms(p_ends boolean) returns integer
language plpgsql volatile as $$
begin
  if not coalesce(p_ends, false) then
    return 0;
  end if;
  perform pg_advisory_xact_lock_shared(:PGONCE_SCHEMA._cache_settle_key());
  if :PGONCE_SCHEMA._cache_leases_last() then
    return :PGONCE_SCHEMA._cache_settle_interval_ms();
  end if;
  return 0;
end
$$;

-- For SQL by hand, after a COMMIT that removed keys, ledger rows or done markers: returns once no process answers
-- from Redis what that commit ended (100 ms while any cache listener's lease lasts, else at once); the ms it waited.
create function :PGONCE_SCHEMA.wait_for_caches() returns integer
language plpgsql volatile as $$
begin
  if :PGONCE_SCHEMA._cache_leases_last() then
    perform pg_sleep(:PGONCE_SCHEMA._cache_settle_interval_ms() / 1000.0);
    return :PGONCE_SCHEMA._cache_settle_interval_ms();
  end if;
  return 0;
end
$$;
comment on function :PGONCE_SCHEMA.wait_for_caches() is
  'Call after the COMMIT of a change made by hand that ended cached facts (a deleted key, ledger row or done marker): returns once no process answers them from Redis. docs/redis.md';

-- The SQL API's removal of a dedup key, whoever owns it (queue.removeDeduplicationKey): deletes it, commits, and
-- waits until no process answers it from Redis. removed: a held key was removed. CALL it outside a transaction block
-- (it commits; inside one, PostgreSQL refuses with "invalid transaction termination").
create procedure :PGONCE_SCHEMA.remove_dedup_key(queue text, key text, inout removed boolean default null)
language plpgsql as $$
declare
  v_ended boolean;
begin
  with gone as (
    delete from :PGONCE_SCHEMA.dedup_keys k
    where k.queue = remove_dedup_key.queue and k.key = remove_dedup_key.key and :PGONCE_SCHEMA._keep_index(k.job_id)
    returning k.job_id, k.expires_at
  )
  select exists (
           select 1 from gone g join :PGONCE_SCHEMA.jobs o on o.id = g.job_id
           where :PGONCE_SCHEMA._key_held(g.expires_at, o.state) and :PGONCE_SCHEMA._keep_index(o.id)),
         exists (select 1 from gone g where g.expires_at > now())
  into removed, v_ended;
  commit;
  if v_ended then
    perform :PGONCE_SCHEMA.wait_for_caches();
  end if;
end
$$;
comment on procedure :PGONCE_SCHEMA.remove_dedup_key(text, text, boolean) is
  'CALL remove_dedup_key(queue, key): deletes the dedup key, commits, and returns once no process answers it from Redis; removed: a held key was removed. docs/redis.md';

-- =================================================================================================================
-- Inspection views: the questions an operator asks in psql
-- =================================================================================================================

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

-- Each queue's limits, the slots in use and how many starts its rate window holds now; the group limits and the group
-- slots held now (all groups).
create view :PGONCE_SCHEMA.queue_limits as
select s.queue, s.concurrency, s.rate_max, s.rate_duration_ms, s.rate_paused_until,
  (select count(*) from :PGONCE_SCHEMA.limit_slots l
   where l.queue = s.queue and l.group_id = '' and l.job_id is not null)::integer as slots_in_use,
  (select count(*) from :PGONCE_SCHEMA.limit_rate_slots r
   where r.queue = s.queue and r.group_id = '' and r.slot <= s.rate_max
     and r.used_at > now() - make_interval(secs => s.rate_duration_ms / 1000.0))::integer as rate_used,
  s.group_concurrency, s.group_rate_max, s.group_rate_duration_ms,
  (select count(*) from :PGONCE_SCHEMA.limit_slots l
   where l.queue = s.queue and l.group_id <> '' and l.job_id is not null)::integer as group_slots_in_use
from :PGONCE_SCHEMA.queue_settings s
where s.concurrency is not null or s.rate_max is not null or s.rate_paused_until > now()
  or :PGONCE_SCHEMA._grouped(s);

-- The due queued jobs (waiting, or delayed and due: what a claim takes) of queues that hold them back now, and what
-- holds each: 'paused', 'ctx.rateLimit' (a handler's hold of the queue), 'concurrency' (every slot is held),
-- 'rateLimit' (the window holds max starts); for a job of a group, 'group ctx.rateLimit' (a handler's hold of its
-- group), 'group concurrency' (its group holds group.concurrency slots) or 'group rate' (its group's window holds
-- group.rateLimit.max starts). A due job of a queue not listed here waits only for a worker.
create view :PGONCE_SCHEMA.held_jobs as
select * from (
  select j.id, j.queue, j.name, j.run_at, case
      when s.paused then 'paused'
      when s.rate_paused_until > now() then 'ctx.rateLimit'
      when s.concurrency is not null and not exists (
        select 1 from :PGONCE_SCHEMA.limit_slots l
        where l.queue = s.queue and l.group_id = '' and l.slot <= s.concurrency and l.job_id is null) then 'concurrency'
      when s.rate_max is not null and not exists (
        select 1 from :PGONCE_SCHEMA.limit_rate_slots r
        where r.queue = s.queue and r.group_id = '' and r.slot <= s.rate_max
          and r.used_at <= now() - make_interval(secs => s.rate_duration_ms / 1000.0)) then 'rateLimit'
      when j.group_id is null then null
      when exists (
        select 1 from :PGONCE_SCHEMA.limit_groups g
        where g.queue = j.queue and g.group_id = j.group_id and g.paused_until > now()) then 'group ctx.rateLimit'
      when s.group_concurrency is not null and (
        select count(*) from :PGONCE_SCHEMA.limit_slots l
        where l.queue = j.queue and l.group_id = j.group_id and l.slot <= s.group_concurrency
          and l.job_id is not null) >= s.group_concurrency
        then 'group concurrency'
      when s.group_rate_max is not null and (
        select count(*) from :PGONCE_SCHEMA.limit_rate_slots r
        where r.queue = j.queue and r.group_id = j.group_id and r.slot <= s.group_rate_max
          and r.used_at > now() - make_interval(secs => s.group_rate_duration_ms / 1000.0)) >= s.group_rate_max
        then 'group rate'
    end as held_by
  from :PGONCE_SCHEMA.jobs j join :PGONCE_SCHEMA.queue_settings s on s.queue = j.queue
  where :PGONCE_SCHEMA._is_queued(j.state) and j.run_at <= now()
) h
where h.held_by is not null;
