--! Previous: sha1:f62b04c9fca570dad0158f8cbc7fb46c4c797487
--! Hash: sha1:04fa46f6810a220915dd58dee759e2668d5e7567
--! Message: limits-and-waits

-- What came after the baseline, in one step (none of it was published apart): a ledger row names its job (the
-- dashboard's effects), flow control (queue-wide and per-group limits), and queue.waitForJob's marker. Each part below
-- says what it does.

-- ---- Effects know their job ----------------------------------------------------------------------------------

-- A ledger row names the job whose ctx.effect recorded it (null: recorded by effects.record() outside a job, or
-- before this column existed), so that a job's page (the dashboard, SQL) lists its effects. No foreign key: the
-- ledger outlives the jobs retention deletes, and an effect stays recorded after its job is gone.
alter table :PGONCE_SCHEMA.processed_effects add column job_id bigint;
create index processed_effects_job on :PGONCE_SCHEMA.processed_effects (job_id) where job_id is not null;
comment on column :PGONCE_SCHEMA.processed_effects.job_id is
  'The job whose ctx.effect recorded the row; null: recorded outside a job (effects.record()).';

-- ---- Flow control -------------------------------------------------------------------------------------------------

-- Flow control (docs/flow-control.md): a queue-wide concurrency and a sliding-window rate limit, stored per queue in
-- queue_settings (queue.setLimits) and enforced by the claim itself through reservation rows: a claim of a limited
-- queue (sql/claim-jobs-limited.sql) takes free rows FOR UPDATE SKIP LOCKED and starts at most as many jobs as it
-- took, in one statement. A concurrency slot is freed by the trigger jobs_slot_released in the transaction that ends
-- the run, fenced by its lock token; a rate row is never freed, it ages: it may be taken again durationMs after its
-- last start. Groups (jobs.group_id): the same limits per group id (queue_settings.group_*), enforced by
-- sql/claim-jobs-grouped.sql with the group's own slot and rate rows, made by the claims that first take them; it
-- serves the groups fairly, the one whose slot was taken longest ago first (limit_slots.taken_at).

alter table :PGONCE_SCHEMA.queue_settings
  add column concurrency integer check (concurrency > 0),
  add column rate_max integer check (rate_max > 0),
  add column rate_duration_ms bigint check (rate_duration_ms > 0),
  add column rate_paused_until timestamptz,
  add constraint queue_settings_rate_limit check ((rate_max is null) = (rate_duration_ms is null)),
  add column group_concurrency integer check (group_concurrency > 0),
  add column group_rate_max integer check (group_rate_max > 0),
  add column group_rate_duration_ms bigint check (group_rate_duration_ms > 0),
  add column group_paused_until timestamptz,
  add constraint queue_settings_group_rate_limit check ((group_rate_max is null) = (group_rate_duration_ms is null));
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

-- The concurrency slot the current (or last) run of a job took, null if none; negated (-slot) once its completion
-- (sql/complete-jobs.sql) freed it, in one update for the batch. Only a run still holding its slot (> 0) fires
-- jobs_slot_released (its WHEN), so a completion, and the end of a job that took no slot (a queue without limits, or
-- with a rate limit only), call no trigger function; the other ends free the slot by primary key.
alter table :PGONCE_SCHEMA.jobs add column limit_slot integer;

-- A job's group (add(name, data, { group: { id } })), null for none: 1 to 128 characters. group_slot is the group
-- concurrency slot its current (or last) run took, as limit_slot (negated once its completion freed it).
alter table :PGONCE_SCHEMA.jobs
  add column group_id text constraint jobs_group_id check (group_id <> '' and length(group_id) <= 128),
  add column group_slot integer;

-- The queued jobs of each group in the claim order: a grouped claim finds the groups with queued jobs (one descent
-- each) and each group's next jobs. Partial: a job without a group adds no entry.
create index jobs_group_due on :PGONCE_SCHEMA.jobs (queue, group_id, priority, run_at, id)
  where group_id is not null and :PGONCE_SCHEMA._is_queued(state);

-- A concurrency limit's slots: `concurrency` rows per queue (group_id '' for the queue-wide limit), free while job_id
-- is null. A group's slots (group_id the group's id) are made by the grouped claim that first takes them (an upsert
-- that takes a missing or free row, re-checked on its newest version), and record when they were last taken
-- (taken_at: the group's last service, which orders the groups for fairness). A claim takes free ones FOR UPDATE SKIP LOCKED and writes its job's id and lock token into each. Only the
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

-- =================================================================================================================
-- Adding jobs to a group
-- =================================================================================================================

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

-- add_job() as in the baseline, with a group: group_id (null: none; 1 to 128 characters, else SQLSTATE 22023). The
-- earlier form is replaced (a call without group_id is the same call).
drop function :PGONCE_SCHEMA.add_job(text, text, jsonb, text, text, bigint, boolean, boolean, bigint, integer, integer,
  jsonb, bigint[], boolean, text, timestamptz, integer);
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

-- add_jobs() as in the baseline, whose items may also have a groupId (a string of 1 to 128 characters).
create or replace function :PGONCE_SCHEMA.add_jobs(queue text, items jsonb, raise_rejection boolean default true)
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

-- ---- Waiting for a job --------------------------------------------------------------------------------------------

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
