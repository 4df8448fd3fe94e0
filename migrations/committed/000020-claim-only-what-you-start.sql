--! Previous: sha1:dc90908ec7279716c9ecb5fd09b4f535dcf080ac
--! Hash: sha1:fcb0f81a0a48d8778fc78b1cd32e91d56fe197e3
--! Message: claim only what you start

-- A worker claims only what it starts (docs/workers.md, "Fetching"): a claim makes its jobs 'active' and their
-- handlers start on the worker's free slots, or within the small window sized from its handlers' pace. No job waits in
-- a worker's hands while pending, so the 'claimed' state goes, and with it the hand-off of migration 000008: only a
-- worker's claim makes a job active, and jobs start in the queue's order (priority, run_at, id).

-- Jobs held 'claimed' by a worker of the old model go back to the queue as they were (their handler never started,
-- their run was not counted); that worker's start then finds them gone and does not run them.
update :PGONCE_SCHEMA.jobs
set state = 'waiting', lock_token = null, locked_until = null, locked_by = null
where state = 'claimed';

alter table :PGONCE_SCHEMA.jobs drop constraint jobs_state_check;
alter table :PGONCE_SCHEMA.jobs add constraint jobs_state_check
  check (state in ('waiting', 'delayed', 'waiting-children', 'active', 'completed', 'failed', 'cancelled'));
comment on table :PGONCE_SCHEMA.jobs is
  'One row per job generation. state: waiting|delayed|waiting-children|active|completed|failed|cancelled. attempts counts handler starts.';

-- Pending: not started.
create or replace function :PGONCE_SCHEMA._is_pending(state text) returns boolean
language sql immutable parallel safe as $$
  select state in ('waiting', 'delayed', 'waiting-children')
$$;

-- Live: pending or running. A jobId is unique among live jobs; a no-TTL key is held while its owner is live.
create or replace function :PGONCE_SCHEMA._is_live(state text) returns boolean
language sql immutable parallel safe as $$
  select state in ('waiting', 'delayed', 'waiting-children', 'active')
$$;

-- Leased: held by a worker under lock_token until locked_until.
create or replace function :PGONCE_SCHEMA._holds_lease(state text) returns boolean
language sql immutable parallel safe as $$
  select state = 'active'
$$;

-- The partial indexes over the rules just changed are built again (no row is 'claimed' any more, so their contents
-- are the same; rebuilt all the same, as any change of a rule an index uses).
reindex index :PGONCE_SCHEMA.jobs_live_job_id;
reindex index :PGONCE_SCHEMA.jobs_leases;

-- The hand-off goes: its target and NOTIFY, the workers' hand-off locks and the listeners table they were found in.
drop function :PGONCE_SCHEMA._hand_off(:PGONCE_SCHEMA.jobs, text, integer);
drop function :PGONCE_SCHEMA._hand_off_target(text, boolean, bigint, text, text, text);
drop function :PGONCE_SCHEMA._handoff_key(text);
drop table :PGONCE_SCHEMA.worker_listeners;
