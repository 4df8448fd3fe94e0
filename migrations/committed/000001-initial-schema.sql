--! Previous: -
--! Hash: sha1:bccd7672c4377e1100553552f05beadab1987761
--! Message: initial schema

-- pgonce initial schema: jobs, dependencies, dedup keys, execution claims and
-- processed effects, plus add_job()/add_jobs(), the one place where admission
-- rules (jobId generations, TTL keys with extend/replace) are decided.
-- :PGONCE_SCHEMA is replaced by the (allow-listed, quoted) schema name.

create schema if not exists :PGONCE_SCHEMA;

create sequence :PGONCE_SCHEMA.job_ids;

create table :PGONCE_SCHEMA.jobs (
  id            bigint primary key default nextval(':PGONCE_SCHEMA.job_ids'),
  queue         text not null,
  name          text not null,
  job_id        text,
  data          jsonb not null,
  state         text not null default 'waiting'
                check (state in ('waiting', 'delayed', 'waiting-children', 'active', 'completed', 'failed')),
  priority      integer not null default 0,
  run_at        timestamptz not null default now(),
  attempts      integer not null default 0,
  max_attempts  integer not null default 1,
  backoff       jsonb,
  dedup_key     text,
  lock_token    uuid,
  locked_until  timestamptz,
  locked_by     text,
  last_error    text,
  error_stack   text,
  result        jsonb,
  created_at    timestamptz not null default now(),
  started_at    timestamptz,
  finished_at   timestamptz
);
comment on table :PGONCE_SCHEMA.jobs is
  'One row per job generation. state: waiting|delayed|waiting-children|active|completed|failed. attempts counts runs started.';

-- A custom job id is unique among live generations, across all queues.
create unique index jobs_live_job_id on :PGONCE_SCHEMA.jobs (job_id)
  where job_id is not null and state in ('waiting', 'delayed', 'waiting-children', 'active');
-- History lookup of a custom id (newest terminal generation).
create index jobs_job_id_history on :PGONCE_SCHEMA.jobs (job_id, id)
  where job_id is not null;
-- The fetch order of workers: priority, then run_at, then id.
create index jobs_due on :PGONCE_SCHEMA.jobs (queue, priority, run_at, id)
  where state in ('waiting', 'delayed');
-- Expired leases, for rescue.
create index jobs_leases on :PGONCE_SCHEMA.jobs (locked_until)
  where state = 'active';
-- Retention pruning of terminal jobs.
create index jobs_finished on :PGONCE_SCHEMA.jobs (finished_at)
  where state in ('completed', 'failed');

create table :PGONCE_SCHEMA.job_dependencies (
  job_id      bigint not null,
  depends_on  bigint not null,
  primary key (job_id, depends_on)
);
create index job_dependencies_parent on :PGONCE_SCHEMA.job_dependencies (depends_on);

create table :PGONCE_SCHEMA.dedup_keys (
  queue       text not null,
  key         text not null,
  job_id      bigint not null,
  expires_at  timestamptz,
  primary key (queue, key)
);
comment on table :PGONCE_SCHEMA.dedup_keys is
  'Held while the owner row exists and (expires_at > now() or (expires_at is null and the owner is live)).';
create index dedup_keys_expiry on :PGONCE_SCHEMA.dedup_keys (expires_at)
  where expires_at is not null;

create table :PGONCE_SCHEMA.execution_claims (
  key         text primary key,
  state       text not null check (state in ('running', 'done')),
  token       uuid,
  expires_at  timestamptz
);
create index execution_claims_expiry on :PGONCE_SCHEMA.execution_claims (expires_at)
  where expires_at is not null;

create table :PGONCE_SCHEMA.processed_effects (
  effect_key   text primary key,
  recorded_at  timestamptz not null default now()
);

create type :PGONCE_SCHEMA.admission as (
  ordinal  integer,
  outcome  text,
  error    text,
  job      :PGONCE_SCHEMA.jobs
);
comment on type :PGONCE_SCHEMA.admission is
  'outcome: added|duplicate-job-id|duplicate-key|extended|replaced; error: EXTEND_NOT_PENDING|REPLACE_HAS_DEPENDENTS|DEPENDENCY_NOT_FOUND (outcome is null, job is the owner).';

create function :PGONCE_SCHEMA._answer(p_outcome text, p_error text, p_job :PGONCE_SCHEMA.jobs)
returns :PGONCE_SCHEMA.admission
language sql immutable as $$
  select row(null::integer, p_outcome, p_error, p_job):::PGONCE_SCHEMA.admission
$$;

create function :PGONCE_SCHEMA._insert_job(
  p_queue text, p_name text, p_data jsonb, p_job_id text, p_dedup_id text,
  p_delay_ms bigint, p_priority integer, p_max_attempts integer, p_backoff jsonb,
  p_depends_on bigint[]
) returns :PGONCE_SCHEMA.jobs
language plpgsql as $$
declare
  v_job :PGONCE_SCHEMA.jobs;
  v_blocked boolean := false;
begin
  if p_depends_on is not null and cardinality(p_depends_on) > 0 then
    select coalesce(bool_or(j.state is distinct from 'completed'), false) into v_blocked
    from unnest(p_depends_on) d(id) left join :PGONCE_SCHEMA.jobs j on j.id = d.id;
  end if;
  insert into :PGONCE_SCHEMA.jobs
    (queue, name, data, job_id, dedup_key, state, run_at, priority, max_attempts, backoff)
  values
    (p_queue, p_name, p_data, p_job_id, p_dedup_id,
     case when v_blocked then 'waiting-children'
          when coalesce(p_delay_ms, 0) > 0 then 'delayed' else 'waiting' end,
     now() + make_interval(secs => coalesce(p_delay_ms, 0) / 1000.0),
     coalesce(p_priority, 0), coalesce(p_max_attempts, 1), p_backoff)
  on conflict (job_id) where job_id is not null and state in ('waiting', 'delayed', 'waiting-children', 'active')
  do nothing
  returning * into v_job;
  if v_job.id is not null and v_blocked then
    insert into :PGONCE_SCHEMA.job_dependencies (job_id, depends_on)
    select v_job.id, d from unnest(p_depends_on) d on conflict do nothing;
  end if;
  return v_job;
end
$$;

-- The admission rules of DESIGN.md §2.1 and §2.2 for one job. Never raises for
-- a rejection: it returns the error code and writes nothing, so that callers
-- decide whether a rejection aborts anything.
create function :PGONCE_SCHEMA._admit(
  p_queue text, p_name text, p_data jsonb, p_job_id text,
  p_dedup_id text, p_dedup_ttl_ms bigint, p_extend boolean, p_replace boolean,
  p_delay_ms bigint, p_priority integer, p_max_attempts integer, p_backoff jsonb,
  p_depends_on bigint[]
) returns :PGONCE_SCHEMA.admission
language plpgsql as $$
declare
  v_job :PGONCE_SCHEMA.jobs;
  v_owner :PGONCE_SCHEMA.jobs;
  v_key :PGONCE_SCHEMA.dedup_keys;
  v_held boolean;
  v_expires timestamptz;
begin
  if p_depends_on is not null and exists (
    select 1 from unnest(p_depends_on) d(id)
    where not exists (select 1 from :PGONCE_SCHEMA.jobs j where j.id = d.id)
  ) then
    return :PGONCE_SCHEMA._answer(null, 'DEPENDENCY_NOT_FOUND', null);
  end if;

  if p_dedup_id is null then
    loop
      v_job := :PGONCE_SCHEMA._insert_job(p_queue, p_name, p_data, p_job_id, null,
        p_delay_ms, p_priority, p_max_attempts, p_backoff, p_depends_on);
      if v_job.id is not null then
        return :PGONCE_SCHEMA._answer('added', null, v_job);
      end if;
      -- The jobId is live: answer with that generation (or, if it has just
      -- gone terminal, try the insert again).
      select * into v_owner from :PGONCE_SCHEMA.jobs
      where job_id = p_job_id and state in ('waiting', 'delayed', 'waiting-children', 'active');
      if found then
        return :PGONCE_SCHEMA._answer('duplicate-job-id', null, v_owner);
      end if;
    end loop;
  end if;

  loop
    -- jobId first: a live generation answers, whatever the key says.
    if p_job_id is not null then
      select * into v_owner from :PGONCE_SCHEMA.jobs
      where job_id = p_job_id and state in ('waiting', 'delayed', 'waiting-children', 'active');
      if found then
        return :PGONCE_SCHEMA._answer('duplicate-job-id', null, v_owner);
      end if;
    end if;

    -- A plain duplicate is answered without taking any lock.
    if not coalesce(p_replace, false) and not coalesce(p_extend, false) then
      select o.* into v_owner
      from :PGONCE_SCHEMA.dedup_keys k join :PGONCE_SCHEMA.jobs o on o.id = k.job_id
      where k.queue = p_queue and k.key = p_dedup_id
        and (k.expires_at > now()
             or (k.expires_at is null and o.state in ('waiting', 'delayed', 'waiting-children', 'active')));
      if found then
        return :PGONCE_SCHEMA._answer('duplicate-key', null, v_owner);
      end if;
    end if;

    select * into v_key from :PGONCE_SCHEMA.dedup_keys
    where queue = p_queue and key = p_dedup_id
    for update;
    v_held := false;
    if found then
      select * into v_owner from :PGONCE_SCHEMA.jobs where id = v_key.job_id;
      v_held := found and (v_key.expires_at > now()
        or (v_key.expires_at is null and v_owner.state in ('waiting', 'delayed', 'waiting-children', 'active')));
    end if;

    if v_held and not coalesce(p_replace, false) then
      if coalesce(p_extend, false) then
        if v_owner.state not in ('waiting', 'delayed', 'waiting-children') then
          return :PGONCE_SCHEMA._answer(null, 'EXTEND_NOT_PENDING', v_owner);
        end if;
        update :PGONCE_SCHEMA.dedup_keys
        set expires_at = now() + make_interval(secs => p_dedup_ttl_ms / 1000.0)
        where queue = p_queue and key = p_dedup_id;
        return :PGONCE_SCHEMA._answer('extended', null, v_owner);
      end if;
      return :PGONCE_SCHEMA._answer('duplicate-key', null, v_owner);
    end if;

    if v_held and exists (
      select 1 from :PGONCE_SCHEMA.job_dependencies d
      join :PGONCE_SCHEMA.jobs c on c.id = d.job_id
      where d.depends_on = v_owner.id
        and c.state in ('waiting', 'delayed', 'waiting-children', 'active')
    ) then
      return :PGONCE_SCHEMA._answer(null, 'REPLACE_HAS_DEPENDENTS', v_owner);
    end if;

    v_job := :PGONCE_SCHEMA._insert_job(p_queue, p_name, p_data, p_job_id, p_dedup_id,
      p_delay_ms, p_priority, p_max_attempts, p_backoff, p_depends_on);
    if v_job.id is null then
      continue;  -- the jobId went live meanwhile: the loop answers with it
    end if;
    v_expires := case when p_dedup_ttl_ms is null then null
                      else now() + make_interval(secs => p_dedup_ttl_ms / 1000.0) end;

    if v_key.queue is null then
      insert into :PGONCE_SCHEMA.dedup_keys (queue, key, job_id, expires_at)
      values (p_queue, p_dedup_id, v_job.id, v_expires)
      on conflict do nothing;
      if not found then
        -- Another add took the key first: undo ours and decide again.
        delete from :PGONCE_SCHEMA.jobs where id = v_job.id;
        v_key := null;
        v_job := null;
        continue;
      end if;
      return :PGONCE_SCHEMA._answer('added', null, v_job);
    end if;

    if v_held then
      -- A pending owner is superseded; an active one keeps running under its lease.
      delete from :PGONCE_SCHEMA.jobs
      where id = v_owner.id and state in ('waiting', 'delayed', 'waiting-children');
      if found then
        delete from :PGONCE_SCHEMA.job_dependencies where job_id = v_owner.id;
      end if;
    end if;
    update :PGONCE_SCHEMA.dedup_keys set job_id = v_job.id, expires_at = v_expires
    where queue = p_queue and key = p_dedup_id;
    return :PGONCE_SCHEMA._answer(case when v_held then 'replaced' else 'added' end, null, v_job);
  end loop;
end
$$;

-- Wakes idle workers of a queue. Skipped when due work was already waiting:
-- whoever added that work woke the workers, and busy workers fetch again on
-- their own. NOTIFY serialises commits, so fewer is faster (README, "Wake-ups").
create function :PGONCE_SCHEMA._queue_was_idle(p_queue text) returns boolean
language sql stable as $$
  select not exists (
    select 1 from :PGONCE_SCHEMA.jobs
    where queue = p_queue and state = 'waiting' and run_at <= now()
  )
$$;

create function :PGONCE_SCHEMA.add_job(
  queue text, name text, data jsonb default '{}'::jsonb, job_id text default null,
  dedup_id text default null, dedup_ttl_ms bigint default null,
  dedup_extend boolean default false, dedup_replace boolean default false,
  delay_ms bigint default null, priority integer default null,
  max_attempts integer default null, backoff jsonb default null,
  depends_on bigint[] default null, raise_rejection boolean default true
) returns :PGONCE_SCHEMA.admission
language plpgsql as $$
declare
  v_result :PGONCE_SCHEMA.admission;
  v_idle boolean;
begin
  if dedup_extend and dedup_ttl_ms is null and not dedup_replace then
    raise exception 'pgonce: dedup_extend needs dedup_ttl_ms' using errcode = '22023';
  end if;
  v_idle := :PGONCE_SCHEMA._queue_was_idle(add_job.queue);
  v_result := :PGONCE_SCHEMA._admit(add_job.queue, add_job.name, add_job.data, add_job.job_id,
    add_job.dedup_id, add_job.dedup_ttl_ms, add_job.dedup_extend, add_job.dedup_replace,
    add_job.delay_ms, add_job.priority, add_job.max_attempts, add_job.backoff, add_job.depends_on);
  if v_result.error is not null and raise_rejection then
    raise exception 'pgonce: % (%)', v_result.error,
      case v_result.error when 'EXTEND_NOT_PENDING' then 'Duplicate unique_key (extended TTL)'
      else 'rejected' end
      using errcode = 'PO001', detail = v_result.error;
  end if;
  if v_result.outcome in ('added', 'replaced')
     and ((v_result.job).state = 'delayed' or ((v_result.job).state = 'waiting' and v_idle)) then
    perform pg_notify(:PGONCE_CHANNEL, add_job.queue);
  end if;
  return v_result;
end
$$;

-- addBulk: one statement, all-or-nothing. Items are jsonb objects with keys
-- name, data, jobId, dedupId, dedupTtlMs, extend, replace, delayMs, priority,
-- attempts, backoff, dependsOn. Items without jobId, key or dependencies go in
-- one set-based INSERT. The others are admitted one by one, sorted by the key
-- (else jobId) they lock, so concurrent batches lock rows in the same order and
-- cannot deadlock; items sharing a key or jobId keep their input order, so they
-- are answered as if added one after another. On a rejection the whole batch
-- is rolled back and a single row carries the error (the caller's transaction
-- stays usable).
create function :PGONCE_SCHEMA.add_jobs(p_queue text, p_items jsonb)
returns setof :PGONCE_SCHEMA.admission
language plpgsql as $$
declare
  v_idle boolean := :PGONCE_SCHEMA._queue_was_idle(p_queue);
  v_item jsonb;
  v_ord integer;
  v_res :PGONCE_SCHEMA.admission;
  v_rejected :PGONCE_SCHEMA.admission;
  v_results :PGONCE_SCHEMA.admission[];
begin
  begin
    with plain as (
      select e.ord::integer as ord, nextval(':PGONCE_SCHEMA.job_ids') as id, e.item
      from jsonb_array_elements(p_items) with ordinality e(item, ord)
      where e.item->'jobId' is null and e.item->'dedupId' is null and e.item->'dependsOn' is null
    ), ins as (
      insert into :PGONCE_SCHEMA.jobs (id, queue, name, data, state, run_at, priority, max_attempts, backoff)
      select p.id, p_queue, p.item->>'name', coalesce(p.item->'data', '{}'::jsonb),
        case when coalesce((p.item->>'delayMs')::bigint, 0) > 0 then 'delayed' else 'waiting' end,
        now() + make_interval(secs => coalesce((p.item->>'delayMs')::bigint, 0) / 1000.0),
        coalesce((p.item->>'priority')::integer, 0), coalesce((p.item->>'attempts')::integer, 1),
        p.item->'backoff'
      from plain p
      returning *
    )
    select coalesce(array_agg(row(p.ord, 'added', null, row(i.*):::PGONCE_SCHEMA.jobs):::PGONCE_SCHEMA.admission), '{}')
    into v_results
    from ins i join plain p on p.id = i.id;

    for v_item, v_ord in
      select e.item, e.ord::integer
      from jsonb_array_elements(p_items) with ordinality e(item, ord)
      where e.item->'jobId' is not null or e.item->'dedupId' is not null or e.item->'dependsOn' is not null
      order by coalesce('k:' || (e.item->>'dedupId'), 'j:' || (e.item->>'jobId'), ''), e.ord
    loop
      v_res := :PGONCE_SCHEMA._admit(p_queue, v_item->>'name', coalesce(v_item->'data', '{}'::jsonb),
        v_item->>'jobId', v_item->>'dedupId', (v_item->>'dedupTtlMs')::bigint,
        coalesce((v_item->>'extend')::boolean, false), coalesce((v_item->>'replace')::boolean, false),
        (v_item->>'delayMs')::bigint, (v_item->>'priority')::integer, (v_item->>'attempts')::integer,
        v_item->'backoff',
        (select array_agg(d::bigint) from jsonb_array_elements_text(v_item->'dependsOn') d));
      v_res.ordinal := v_ord;
      if v_res.error is not null then
        v_rejected := v_res;
        raise exception 'pgonce: batch item % rejected: %', v_ord, v_res.error using errcode = 'PO001';
      end if;
      v_results := v_results || v_res;
    end loop;
  exception when sqlstate 'PO001' then
    return next v_rejected;
    return;
  end;

  if exists (
    select 1 from unnest(v_results) r
    where r.outcome in ('added', 'replaced')
      and ((r.job).state = 'delayed' or ((r.job).state = 'waiting' and v_idle))
  ) then
    perform pg_notify(:PGONCE_CHANNEL, p_queue);
  end if;
  return query select * from unnest(v_results) r order by r.ordinal;
end
$$;
