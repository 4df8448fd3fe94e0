--! Previous: sha1:dc90908ec7279716c9ecb5fd09b4f535dcf080ac
--! Hash: sha1:422c926f29599f7d7aa4c7264237ab8872073dd6
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

-- Three INSERTs of jobs, each for a named case (docs/architecture.md, "Entry points"): _admit_one() for an add with
-- anything to decide and for every add through the SQL API, sql/add-plain-job.sql for a plain queue.add,
-- sql/add-plain-jobs.sql for a plain queue.addBulk. A batch through _add_jobs() (add_jobs(), or a queue.addBulk with
-- a jobId, key or dependency) admits every item, plain ones too, with _admit_one() in input order; _insert_jobs(), the
-- fourth INSERT, goes. Its plain items cost a call each (a 1,000-item add_jobs() of plain items ~23 -> ~75 ms in a
-- probe on a 2-core VM); the bulk loads the bench measures take sql/add-plain-jobs.sql.
create or replace function :PGONCE_SCHEMA._admit_batch(
  p_queue text, p_names text[], p_datas jsonb[], p_job_ids text[], p_dedup_ids text[], p_dedup_ttls_ms bigint[],
  p_extends boolean[], p_replaces boolean[], p_delays_ms bigint[], p_priorities integer[], p_max_attempts integer[],
  p_backoffs jsonb[], p_depends_on text[], p_trace_contexts text[]
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
      p_priorities[i], p_max_attempts[i], p_backoffs[i], p_depends_on[i]::bigint[], p_trace_contexts[i]);
    -- An element assigned in place (an append would copy the array each time).
    v_answers[i] := row(i, v_one.outcome, v_one.error, v_one.job):::PGONCE_SCHEMA.admission;
    exit when v_one.error is not null;
  end loop;
  return v_answers;
end
$$;
drop function :PGONCE_SCHEMA._insert_jobs(text, text[], jsonb[], text[], text[], bigint[], integer[], integer[], jsonb[], boolean[], text[]);
