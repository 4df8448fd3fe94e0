--! Previous: sha1:c7f694e780d9ccf6a0b19d6f1fd5395a34b43fd1
--! Hash: sha1:34957861a65177a1bc1587057728195877b9c160
--! Message: one home for every rule

-- One home for every rule (docs/architecture.md). Every admission rule is a function written once and used by every
-- path: the job states (_is_pending, _is_live, _is_terminal, _is_queued, _holds_lease), "the key is held"
-- (_key_held), the job defaults (_job_defaults), the wake-up rule (_wake), the one INSERT of a job (_insert_jobs), the
-- decision for one keyed add (_admit_one), and what happens when a job finishes (the jobs_finished trigger: release of a
-- no-TTL key, promotion or failure of dependents). add_job(), add_jobs() and queue.add / queue.addBulk all reach the
-- same functions.
--
-- New states: 'claimed' (a worker holds the job under a lease but has not started its handler: still pending, so
-- replace, cancel and removal treat it as not started) and 'cancelled' (terminal). Workers no longer sign up in
-- idle_workers for hand-offs: an idle worker holds an advisory lock on one of four idle slots of its queue, and an add
-- NOTIFYs only when one of them is held (_wake): no table is read, so adds do not walk dead rows however long another
-- transaction holds back the xmin horizon.

-- ---------------------------------------------------------------------------------------------------------------
-- Out with the hand-off.
drop function if exists :PGONCE_SCHEMA.add_plain_jobs(text, jsonb);
drop function if exists :PGONCE_SCHEMA._reject_plain_item(jsonb);
drop function if exists :PGONCE_SCHEMA.add_jobs(text, jsonb);
drop function if exists :PGONCE_SCHEMA.add_job(text, text, jsonb, text, text, bigint, boolean, boolean, bigint, integer, integer, jsonb, bigint[], boolean);
drop function if exists :PGONCE_SCHEMA._insert_job(text, text, jsonb, text, text, bigint, integer, integer, jsonb, bigint[]);
drop function if exists :PGONCE_SCHEMA._reject(text, boolean);
drop function if exists :PGONCE_SCHEMA._promote_dependents(bigint[]);
drop table if exists :PGONCE_SCHEMA.idle_workers;
drop type if exists :PGONCE_SCHEMA.admission;
drop view if exists :PGONCE_SCHEMA.job_counts;
drop view if exists :PGONCE_SCHEMA.held_keys;
drop view if exists :PGONCE_SCHEMA.failed_jobs;

-- ---------------------------------------------------------------------------------------------------------------
-- The job states. Immutable SQL functions: the planner inlines them, in queries and in the partial indexes'
-- predicates alike. Changing one means rebuilding the indexes that use it (a migration).

-- Pending: not started. A claimed job is held by a worker that has not started its handler yet.
create function :PGONCE_SCHEMA._is_pending(state text) returns boolean
language sql immutable parallel safe as $$
  select state in ('waiting', 'delayed', 'waiting-children', 'claimed')
$$;

-- Live: pending or running. A jobId is unique among live jobs; a no-TTL key is held while its owner is live.
create function :PGONCE_SCHEMA._is_live(state text) returns boolean
language sql immutable parallel safe as $$
  select state in ('waiting', 'delayed', 'waiting-children', 'claimed', 'active')
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

-- Leased: held by a worker under lock_token until locked_until.
create function :PGONCE_SCHEMA._holds_lease(state text) returns boolean
language sql immutable parallel safe as $$
  select state in ('claimed', 'active')
$$;

-- A dedup key is held while its owner row exists and either its TTL runs, or it has no TTL and the owner is live.
-- owner_state is null when the owner row is missing (deleted by hand or pruned): not held.
create function :PGONCE_SCHEMA._key_held(expires_at timestamptz, owner_state text) returns boolean
language sql stable parallel safe as $$
  select owner_state is not null
     and (expires_at > now() or (expires_at is null and :PGONCE_SCHEMA._is_live(owner_state)))
$$;

-- What an add leaves unsaid.
create function :PGONCE_SCHEMA._job_defaults(out priority integer, out max_attempts integer)
language sql immutable parallel safe as $$
  select 0, 1
$$;

-- ---------------------------------------------------------------------------------------------------------------
-- The jobs table gains the new states, the columns later features need, and partial indexes written with the rules.

alter table :PGONCE_SCHEMA.jobs drop constraint if exists jobs_state_check;
alter table :PGONCE_SCHEMA.jobs add constraint jobs_state_check
  check (state in ('waiting', 'delayed', 'waiting-children', 'claimed', 'active', 'completed', 'failed', 'cancelled'));
-- The defaults of a row inserted by hand are the rule's too.
alter table :PGONCE_SCHEMA.jobs alter column priority set default (:PGONCE_SCHEMA._job_defaults()).priority;
alter table :PGONCE_SCHEMA.jobs alter column max_attempts set default (:PGONCE_SCHEMA._job_defaults()).max_attempts;
alter table :PGONCE_SCHEMA.jobs
  add column has_dependents boolean not null default false,
  add column cancel_requested_at timestamptz,
  add column progress jsonb,
  add column trace_context text;
comment on table :PGONCE_SCHEMA.jobs is
  'One row per job generation. state: waiting|delayed|waiting-children|claimed|active|completed|failed|cancelled (claimed: leased by a worker, handler not started). attempts counts handler starts.';
-- What a caller of the SQL API could otherwise store and no worker could take: the same limits the TypeScript API
-- checks before any I/O (docs/validation.md). NOT VALID: rows stored before these checks are left as they are.
alter table :PGONCE_SCHEMA.jobs
  add constraint jobs_queue_name check (queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$') not valid,
  add constraint jobs_name_bytes check (octet_length(name) between 1 and 255) not valid,
  add constraint jobs_job_id_bytes check (job_id is null or octet_length(job_id) between 1 and 255) not valid,
  add constraint jobs_dedup_key_bytes check (dedup_key is null or octet_length(dedup_key) between 1 and 255) not valid;
comment on column :PGONCE_SCHEMA.jobs.has_dependents is 'A job added with dependsOn names this one: its end promotes or fails them (jobs_finished).';
comment on column :PGONCE_SCHEMA.jobs.cancel_requested_at is 'queue.cancelJob() on a running job: its handler is aborted and it ends cancelled.';
comment on column :PGONCE_SCHEMA.jobs.trace_context is 'W3C traceparent of the add, continued by the worker''s span.';

drop index :PGONCE_SCHEMA.jobs_live_job_id;
create unique index jobs_live_job_id on :PGONCE_SCHEMA.jobs (job_id)
  where job_id is not null and :PGONCE_SCHEMA._is_live(state);
drop index :PGONCE_SCHEMA.jobs_due;
create index jobs_due on :PGONCE_SCHEMA.jobs (queue, priority, run_at, id)
  where :PGONCE_SCHEMA._is_queued(state);
-- The next delayed job of a queue, for a worker's due timer (without walking jobs_due's entries of claimed jobs).
create index jobs_delayed on :PGONCE_SCHEMA.jobs (queue, run_at)
  where state = 'delayed';
drop index :PGONCE_SCHEMA.jobs_leases;
create index jobs_leases on :PGONCE_SCHEMA.jobs (locked_until)
  where :PGONCE_SCHEMA._holds_lease(state);

-- Keys and dependency edges go with their job (a key whose owner is gone is not held anyway).
delete from :PGONCE_SCHEMA.dedup_keys k where not exists (select 1 from :PGONCE_SCHEMA.jobs j where j.id = k.job_id);
alter table :PGONCE_SCHEMA.dedup_keys
  add constraint dedup_keys_owner foreign key (job_id) references :PGONCE_SCHEMA.jobs (id) on delete cascade;
create index dedup_keys_job on :PGONCE_SCHEMA.dedup_keys (job_id);
delete from :PGONCE_SCHEMA.job_dependencies d
where not exists (select 1 from :PGONCE_SCHEMA.jobs j where j.id = d.job_id)
   or not exists (select 1 from :PGONCE_SCHEMA.jobs j where j.id = d.depends_on);
alter table :PGONCE_SCHEMA.job_dependencies
  add constraint job_dependencies_job foreign key (job_id) references :PGONCE_SCHEMA.jobs (id) on delete cascade,
  add constraint job_dependencies_parent foreign key (depends_on) references :PGONCE_SCHEMA.jobs (id) on delete cascade;
update :PGONCE_SCHEMA.jobs j set has_dependents = true
where exists (select 1 from :PGONCE_SCHEMA.job_dependencies d where d.depends_on = j.id);

-- ---------------------------------------------------------------------------------------------------------------
-- Waking workers. An idle worker holds, on its LISTEN connection, a session advisory lock on one of four idle slots of
-- its queue (workers past four stay unlisted: every NOTIFY reaches them too, and each wake-up re-deals the slots).
-- An add NOTIFYs only when a slot is held: busy workers claim again on their own, and NOTIFY serialises commits.
-- The probe takes a shared lock and gives it back in the same expression, so that adds never wait for each other.

-- The advisory-lock key of idle slot p_slot (0 to 3) of p_queue: the queue's hash with its two low bits the slot.
create function :PGONCE_SCHEMA._idle_slot_key(p_queue text, p_slot integer) returns bigint
language sql immutable parallel safe as $$
  select (hashtextextended(:PGONCE_CHANNEL || ':idle:' || p_queue, 0) & ~3::bigint) | p_slot
$$;

-- Whether an idle worker of p_queue holds one of its slots. One expression (a CASE evaluates its branches in order),
-- about 3 µs: a loop of statements cost ten times that on every add.
create function :PGONCE_SCHEMA._idle_worker_waits(p_queue text) returns boolean
language plpgsql volatile as $$
declare
  v_base bigint := :PGONCE_SCHEMA._idle_slot_key(p_queue, 0);
begin
  return case
    when not pg_try_advisory_lock_shared(v_base) then true
    when not pg_advisory_unlock_shared(v_base) then true
    when not pg_try_advisory_lock_shared(v_base | 1) then true
    when not pg_advisory_unlock_shared(v_base | 1) then true
    when not pg_try_advisory_lock_shared(v_base | 2) then true
    when not pg_advisory_unlock_shared(v_base | 2) then true
    when not pg_try_advisory_lock_shared(v_base | 3) then true
    when not pg_advisory_unlock_shared(v_base | 3) then true
    else false end;
end
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

-- ---------------------------------------------------------------------------------------------------------------
-- The end of a job. Whatever ends it (a worker's completion or failure, housekeeping's rescue, cancelJob, an operator's
-- UPDATE), in the same transaction: a no-TTL dedup key is released if this job still owns it (generation-safe), and
-- its dependents waiting in 'waiting-children' are promoted (when it completed and their other parents have too) or
-- failed (when it failed or was cancelled: they can never run).

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

create trigger jobs_finished after update of state on :PGONCE_SCHEMA.jobs
for each row
when (:PGONCE_SCHEMA._is_terminal(new.state) and not :PGONCE_SCHEMA._is_terminal(old.state)
      and (new.dedup_key is not null or new.has_dependents))
execute function :PGONCE_SCHEMA._job_finished();

-- A parent deleted before it completed (removeJob of a pending job): its waiting dependents can never run.
create function :PGONCE_SCHEMA._job_removed() returns trigger
language plpgsql as $$
begin
  perform :PGONCE_SCHEMA._promote_or_fail_dependents(old.id, 'removed');
  return old;
end
$$;

create trigger jobs_removed before delete on :PGONCE_SCHEMA.jobs
for each row
when (old.has_dependents and old.state <> 'completed')
execute function :PGONCE_SCHEMA._job_removed();

-- ---------------------------------------------------------------------------------------------------------------
-- Adding jobs.

create type :PGONCE_SCHEMA.admission_error as enum ('EXTEND_NOT_PENDING', 'REPLACE_HAS_DEPENDENTS', 'DEPENDENCY_NOT_FOUND');

-- The one INSERT of jobs, for a batch of items given as parallel arrays (one element per job; a null element takes
-- the default). Ids are drawn in array order, so ordering the answer by id gives array order. A job whose jobId is
-- live already is not inserted (no row comes back for it). Does not wake workers: its callers do, once. plpgsql, so
-- that the INSERT is planned once per connection (a SQL function's statements are planned at every call).
create function :PGONCE_SCHEMA._insert_jobs(
  p_queue text, p_names text[], p_datas jsonb[], p_job_ids text[], p_dedup_ids text[], p_delays_ms bigint[],
  p_priorities integer[], p_max_attempts integer[], p_backoffs jsonb[], p_blocked boolean[], p_trace_contexts text[]
) returns setof :PGONCE_SCHEMA.jobs
language plpgsql volatile as $$
begin
  return query
  insert into :PGONCE_SCHEMA.jobs
    (id, queue, name, data, job_id, dedup_key, state, run_at, priority, max_attempts, backoff, trace_context)
  select nextval(':PGONCE_SCHEMA.job_ids'), p_queue, i.name, coalesce(i.data, '{}'::jsonb), i.job_id, i.dedup_id,
    case when coalesce(i.blocked, false) then 'waiting-children'
         when coalesce(i.delay_ms, 0) > 0 then 'delayed' else 'waiting' end,
    now() + make_interval(secs => coalesce(i.delay_ms, 0) / 1000.0),
    coalesce(i.priority, d.priority), coalesce(i.max_attempts, d.max_attempts), i.backoff, i.trace_context
  from (
    select * from unnest(p_names, p_datas, p_job_ids, p_dedup_ids, p_delays_ms, p_priorities, p_max_attempts,
                         p_backoffs, p_blocked, p_trace_contexts)
      with ordinality as u(name, data, job_id, dedup_id, delay_ms, priority, max_attempts, backoff, blocked, trace_context, ord)
    order by u.ord
  ) i cross join :PGONCE_SCHEMA._job_defaults() d
  on conflict (job_id) where job_id is not null and :PGONCE_SCHEMA._is_live(state) do nothing
  returning *;
end
$$;

-- The admission rules for one add that has a jobId, a dedup key or dependencies (plain adds need no decision):
-- see docs/deduplication.md for the table this implements. Never raises for a rejection: it comes back in "error",
-- with the key's owner as the job, and nothing is written.
create function :PGONCE_SCHEMA._admit_one(
  p_queue text, p_name text, p_data jsonb, p_job_id text, p_dedup_id text, p_dedup_ttl_ms bigint,
  p_extend boolean, p_replace boolean, p_delay_ms bigint, p_priority integer, p_max_attempts integer,
  p_backoff jsonb, p_depends_on bigint[], p_trace_context text,
  out outcome text, out error :PGONCE_SCHEMA.admission_error, out job :PGONCE_SCHEMA.jobs
)
language plpgsql volatile as $$
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

    select * into job from :PGONCE_SCHEMA._insert_jobs(p_queue, array[p_name], array[p_data], array[p_job_id],
      array[p_dedup_id], array[p_delay_ms], array[p_priority], array[p_max_attempts], array[p_backoff],
      array[v_blocked], array[p_trace_context]);
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

-- One row of an add's answer: how item "ordinal" (1-based position in the caller's list) was decided, and the job
-- that now stands for it. On a rejection outcome is null and error names it (the job is the key's owner, if any).
create type :PGONCE_SCHEMA.admission as (
  ordinal  integer,
  outcome  text,
  error    :PGONCE_SCHEMA.admission_error,
  job      :PGONCE_SCHEMA.jobs
);

-- Admits a batch given as parallel arrays (see _insert_jobs): the plain items (no jobId, key or dependency) in one
-- INSERT, then the others one by one in array order, so that repeats of a jobId or key are answered as if added one
-- after another; it stops at the first rejected item, whose answer comes last. Writes what it admitted: the caller
-- undoes it on a rejection.
create function :PGONCE_SCHEMA._admit_batch(
  p_queue text, p_names text[], p_datas jsonb[], p_job_ids text[], p_dedup_ids text[], p_dedup_ttls_ms bigint[],
  p_extends boolean[], p_replaces boolean[], p_delays_ms bigint[], p_priorities integer[], p_max_attempts integer[],
  p_backoffs jsonb[], p_depends_on text[], p_trace_contexts text[]
) returns :PGONCE_SCHEMA.admission[]
language plpgsql volatile as $$
declare
  v_n integer := coalesce(cardinality(p_names), 0);
  v_plain boolean[];
  v_answers :PGONCE_SCHEMA.admission[] := '{}';
  v_one record;
  i integer;
begin
  select coalesce(array_agg(p_job_ids[s] is null and p_dedup_ids[s] is null and p_depends_on[s] is null order by s), '{}')
  into v_plain from generate_series(1, v_n) s;

  if true = any(v_plain) then
    -- nextval() follows array order, so the inserted rows in id order are the plain items in array order.
    with ins as (
      select j from :PGONCE_SCHEMA._insert_jobs(p_queue,
        array(select p_names[s] from generate_series(1, v_n) s where v_plain[s] order by s),
        array(select p_datas[s] from generate_series(1, v_n) s where v_plain[s] order by s),
        null, null,
        array(select p_delays_ms[s] from generate_series(1, v_n) s where v_plain[s] order by s),
        array(select p_priorities[s] from generate_series(1, v_n) s where v_plain[s] order by s),
        array(select p_max_attempts[s] from generate_series(1, v_n) s where v_plain[s] order by s),
        array(select p_backoffs[s] from generate_series(1, v_n) s where v_plain[s] order by s),
        null,
        array(select p_trace_contexts[s] from generate_series(1, v_n) s where v_plain[s] order by s)) j
    ), numbered as (
      select row_number() over (order by (ins.j).id) as k, ins.j from ins
    ), positions as (
      select row_number() over (order by s) as k, s from generate_series(1, v_n) s where v_plain[s]
    )
    select array_agg(row(p.s::integer, 'added', null, n.j):::PGONCE_SCHEMA.admission order by p.s)
    into v_answers
    from numbered n join positions p on p.k = n.k;
  end if;

  for i in select s from generate_series(1, v_n) s where not v_plain[s] order by s loop
    select * into v_one from :PGONCE_SCHEMA._admit_one(p_queue, p_names[i], p_datas[i], p_job_ids[i], p_dedup_ids[i],
      p_dedup_ttls_ms[i], coalesce(p_extends[i], false), coalesce(p_replaces[i], false), p_delays_ms[i],
      p_priorities[i], p_max_attempts[i], p_backoffs[i], p_depends_on[i]::bigint[], p_trace_contexts[i]);
    v_answers := v_answers || row(i, v_one.outcome, v_one.error, v_one.job):::PGONCE_SCHEMA.admission;
    exit when v_one.error is not null;
  end loop;
  return v_answers;
end
$$;

-- Adds a batch given as parallel arrays (see _insert_jobs), all or nothing: a rejected item undoes the whole batch
-- and comes back as the only row; "ordinal" is each item's 1-based position. Items are decided in array order, but
-- a batch with several keys or jobIds first takes a transaction advisory lock on each of them in sorted order, so
-- that two batches over the same keys in opposite orders wait for each other instead of deadlocking on the rows.
-- Wakes the queue's idle workers once, if it queued anything.
create function :PGONCE_SCHEMA._add_jobs(
  p_queue text, p_names text[], p_datas jsonb[], p_job_ids text[], p_dedup_ids text[], p_dedup_ttls_ms bigint[],
  p_extends boolean[], p_replaces boolean[], p_delays_ms bigint[], p_priorities integer[], p_max_attempts integer[],
  p_backoffs jsonb[], p_depends_on text[], p_trace_contexts text[]
) returns setof :PGONCE_SCHEMA.admission
language plpgsql volatile as $$
declare
  v_answers :PGONCE_SCHEMA.admission[];
  v_last :PGONCE_SCHEMA.admission;
begin
  perform pg_advisory_xact_lock(hashtextextended(:PGONCE_CHANNEL || ':admit:' || l.k, 0))
  from (
    select distinct k from (
      select 'k:' || p_queue || ':' || d as k from unnest(p_dedup_ids) d where d is not null
      union all
      select 'j:' || j from unnest(p_job_ids) j where j is not null) x
    order by k
  ) l
  where (select count(*) from unnest(p_dedup_ids) d where d is not null)
      + (select count(*) from unnest(p_job_ids) j where j is not null) > 1;
  -- Only extend, replace and dependsOn can be rejected, and a rejected item writes nothing itself: the savepoint
  -- (a subtransaction) is paid only by batches in which an earlier item may have to be undone.
  if coalesce(cardinality(p_names), 0) > 1 and (true = any(p_extends) or true = any(p_replaces)
      or exists (select 1 from unnest(p_depends_on) d where d is not null)) then
    begin
      v_answers := :PGONCE_SCHEMA._admit_batch(p_queue, p_names, p_datas, p_job_ids, p_dedup_ids, p_dedup_ttls_ms,
        p_extends, p_replaces, p_delays_ms, p_priorities, p_max_attempts, p_backoffs, p_depends_on, p_trace_contexts);
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
      p_extends, p_replaces, p_delays_ms, p_priorities, p_max_attempts, p_backoffs, p_depends_on, p_trace_contexts);
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

-- Adds one job with the rules of docs/deduplication.md: the SQL face of queue.add, for triggers, psql and any client.
-- A rejection (error EXTEND_NOT_PENDING, REPLACE_HAS_DEPENDENTS, DEPENDENCY_NOT_FOUND) writes nothing; it raises
-- SQLSTATE PO001 unless raise_rejection is false, in which case it comes back in the error column.
create function :PGONCE_SCHEMA.add_job(
  queue text, name text, data jsonb default '{}'::jsonb, job_id text default null,
  dedup_id text default null, dedup_ttl_ms bigint default null,
  dedup_extend boolean default false, dedup_replace boolean default false,
  delay_ms bigint default null, priority integer default null,
  max_attempts integer default null, backoff jsonb default null,
  depends_on bigint[] default null, raise_rejection boolean default true, trace_context text default null
) returns :PGONCE_SCHEMA.admission
language plpgsql volatile as $$
declare
  v_answer :PGONCE_SCHEMA.admission;
  v_job :PGONCE_SCHEMA.jobs;
begin
  -- One item needs neither _add_jobs()'s savepoint nor its locks: the same rules, called directly.
  if $4 is null and $5 is null and $13 is null then
    select * into v_job from :PGONCE_SCHEMA._insert_jobs($1, array[$2], array[$3], null, null, array[$9], array[$10],
      array[$11], array[$12], null, array[$15]);
    v_answer := row(1, 'added', null, v_job);
  else
    select 1, a.outcome, a.error, a.job into v_answer from :PGONCE_SCHEMA._admit_one($1, $2, $3, $4, $5, $6,
      coalesce($7, false), coalesce($8, false), $9, $10, $11, $12, $13, $15) a;
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
-- replace, delayMs, priority, attempts, backoff, dependsOn (an array of job ids). An item that is not an object, or
-- has any other key (a typo must never drop a guarantee silently), is refused with SQLSTATE 22023 and nothing is
-- added. All or nothing, as _add_jobs: a rejected item raises PO001 (detail: its error), unless raise_rejection is
-- false, in which case it comes back as the only row.
create function :PGONCE_SCHEMA.add_jobs(queue text, items jsonb, raise_rejection boolean default true)
returns setof :PGONCE_SCHEMA.admission
language plpgsql volatile as $$
declare
  v_bad jsonb;
  v_answer :PGONCE_SCHEMA.admission;
begin
  select e into v_bad from jsonb_array_elements(items) e
  where jsonb_typeof(e) <> 'object'
     or e - '{name,data,jobId,dedupId,dedupTtlMs,extend,replace,delayMs,priority,attempts,backoff,dependsOn}'::text[] <> '{}'::jsonb
  limit 1;
  if found then
    raise exception 'pgonce: add_jobs() items are objects with the keys name, data, jobId, dedupId, dedupTtlMs, extend, replace, delayMs, priority, attempts, backoff, dependsOn (item: %)',
      left(v_bad::text, 200) using errcode = '22023';
  end if;
  for v_answer in
    select a.* from (
      select array_agg(e->>'name' order by o) n, array_agg(e->'data' order by o) d, array_agg(e->>'jobId' order by o) j,
        array_agg(e->>'dedupId' order by o) k, array_agg((e->>'dedupTtlMs')::bigint order by o) t,
        array_agg((e->>'extend')::boolean order by o) x, array_agg((e->>'replace')::boolean order by o) r,
        array_agg((e->>'delayMs')::bigint order by o) dl, array_agg((e->>'priority')::integer order by o) p,
        array_agg((e->>'attempts')::integer order by o) at, array_agg(e->'backoff' order by o) b,
        array_agg(case when e ? 'dependsOn' then translate((e->'dependsOn')::text, '[]"', '{}') end order by o) dep
      from jsonb_array_elements(items) with ordinality e(e, o)
    ) i, :PGONCE_SCHEMA._add_jobs($1, i.n, i.d, i.j, i.k, i.t, i.x, i.r, i.dl, i.p, i.at, i.b, i.dep, null) a
  loop
    if v_answer.error is not null and raise_rejection then
      raise exception 'pgonce: batch item % rejected: %', v_answer.ordinal, v_answer.error
        using errcode = 'PO001', detail = v_answer.error::text;
    end if;
    return next v_answer;
  end loop;
end
$$;

-- ---------------------------------------------------------------------------------------------------------------
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
where :PGONCE_SCHEMA._key_held(k.expires_at, o.state);

-- What failed for good, and why (the dead-letter set); retry one with queue.retryJob(id).
create view :PGONCE_SCHEMA.failed_jobs as
select id, queue, name, job_id, attempts, max_attempts, last_error, error_stack, finished_at, data
from :PGONCE_SCHEMA.jobs
where state = 'failed';

-- ---------------------------------------------------------------------------------------------------------------
-- The answer to an add, as queue.add and queue.addBulk read it: how the item was decided, and the job. A job this
-- call inserted (added, replaced) comes back as the few columns the caller cannot know; any other job (a duplicate's
-- owner, an extended one, a rejection's owner) whole, as JSON text with its id as a string. Set-returning, so that
-- the planner inlines it.
create function :PGONCE_SCHEMA._answer(a :PGONCE_SCHEMA.admission)
returns table (ordinal integer, outcome text, error text, id text, state text, priority integer,
  max_attempts integer, run_at_ms float8, created_at_ms float8, job text)
language sql immutable rows 1 as $$
  select a.ordinal, a.outcome, a.error::text, (a.job).id::text, (a.job).state, (a.job).priority, (a.job).max_attempts,
    (extract(epoch from (a.job).run_at) * 1000)::float8, (extract(epoch from (a.job).created_at) * 1000)::float8,
    case when a.outcome is null or a.outcome not in ('added', 'replaced')
      then (to_jsonb(a.job) || jsonb_build_object('id', (a.job).id::text))::text end
$$;

-- ---------------------------------------------------------------------------------------------------------------
-- A worker's step: completes the jobs whose handlers returned (fenced by state and lock token; a job whose
-- cancellation was requested ends 'cancelled') and starts the claimed-ahead jobs that got a free handler slot
-- ('claimed' -> 'active', run counted, lease renewed; one missing from the answer was superseded, cancelled, removed or
-- taken over, and must not run). Returns a row per job it changed. A step that only starts jobs commits without waiting
-- for the WAL flush (a start lost in a crash leaves its job claimed, and the rescue puts it back); a completion waits
-- for it. A plpgsql function, so that its statements are planned once per connection. Each job is found by primary
-- key: "state || ''" keeps any plan from driving the update from the jobs_leases partial index, whose row estimate
-- (the leases at the last ANALYZE) is often far too small; a scan of every lease made each step cost O(leases).
create function :PGONCE_SCHEMA._step_jobs(
  p_done_ids bigint[], p_done_tokens uuid[], p_results text[], p_start_ids bigint[], p_start_tokens uuid[],
  p_lease_ms bigint
) returns table (token uuid, state text, attempts integer)
language plpgsql volatile as $$
begin
  if cardinality(p_done_ids) > 0 then
    return query
    update :PGONCE_SCHEMA.jobs j
    set state = case when j.cancel_requested_at is null then 'completed' else 'cancelled' end,
        result = i.result::jsonb, finished_at = now(), locked_until = null
    from unnest(p_done_ids, p_done_tokens, p_results) as i(id, token, result)
    where j.id = i.id and j.state || '' = 'active' and j.lock_token = i.token
    returning j.lock_token, j.state, j.attempts;
  end if;
  if cardinality(p_start_ids) > 0 then
    if coalesce(cardinality(p_done_ids), 0) = 0 then
      perform set_config('synchronous_commit', 'off', true);
    end if;
    return query
    update :PGONCE_SCHEMA.jobs j
    set state = 'active', attempts = j.attempts + 1, started_at = now(),
        locked_until = now() + make_interval(secs => p_lease_ms / 1000.0)
    from unnest(p_start_ids, p_start_tokens) as i(id, token)
    where j.id = i.id and j.state || '' = 'claimed' and j.lock_token = i.token
    returning j.lock_token, j.state, j.attempts;
  end if;
end
$$;

-- ---------------------------------------------------------------------------------------------------------------
-- A job as a worker receives it when it claims or takes it over: what the handler sees, the lock token that fences
-- every later change, and its times in ms (float8 is cheaper for the client to read than timestamptz). Declared as a
-- set-returning SQL function so that the planner inlines it into the statements that use it.
create function :PGONCE_SCHEMA._as_claimed(j :PGONCE_SCHEMA.jobs)
returns table (id bigint, queue text, name text, job_id text, data jsonb, state text, priority integer,
  attempts integer, max_attempts integer, backoff jsonb, dedup_key text, lock_token uuid, last_error text,
  error_stack text, progress jsonb, trace_context text, run_at_ms float8, created_at_ms float8)
language sql immutable rows 1 as $$
  select j.id, j.queue, j.name, j.job_id, j.data, j.state, j.priority, j.attempts, j.max_attempts, j.backoff,
    j.dedup_key, j.lock_token, j.last_error, j.error_stack, j.progress, j.trace_context,
    (extract(epoch from j.run_at) * 1000)::float8, (extract(epoch from j.created_at) * 1000)::float8
$$;
