--! Previous: -
--! Hash: sha1:cbe55149915d30247b28f29dcc8c13a7fdf8cd2c
--! Message: schema
--! AllowInvalidHash

-- Edited after commit in comments only (a citation of a design file that is not in the repository now cites docs/):
-- the hash above is the committed one, which installed schemas and 000002's Previous record; the schema is unchanged.

-- pgonce schema: jobs, dependencies, dedup keys, execution claims and
-- processed effects; add_job()/add_jobs(), the one place where admission
-- rules (jobId generations, TTL keys with extend/replace) are decided;
-- dependents' promotion; inspection views.
-- :PGONCE_SCHEMA is replaced by the (allow-listed, quoted) schema name, and
-- :PGONCE_CHANNEL by the LISTEN/NOTIFY channel of that schema.

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

-- Inserts one job unless its jobId is live (then returns null). Wakes idle
-- workers: NOTIFY only when the queue had no due waiting job before this insert
-- (whoever added that one woke them, and busy workers fetch again on their
-- own), or when the job is delayed (workers re-arm their timers). NOTIFY
-- serialises commits, so fewer is faster.
create function :PGONCE_SCHEMA._insert_job(
  p_queue text, p_name text, p_data jsonb, p_job_id text, p_dedup_id text,
  p_delay_ms bigint, p_priority integer, p_max_attempts integer, p_backoff jsonb,
  p_depends_on bigint[]
) returns :PGONCE_SCHEMA.jobs
language plpgsql as $$
declare
  v_blocked boolean := false;
  v_row record;
begin
  if p_depends_on is not null and cardinality(p_depends_on) > 0 then
    -- Lock the parents first: one completing right now either commits before
    -- the read below (and is seen completed), or waits for this insert to
    -- commit and then promotes it (_promote_dependents reads with a fresh
    -- snapshot).
    perform 1 from :PGONCE_SCHEMA.jobs where id = any(p_depends_on) order by id for share;
    select coalesce(bool_or(j.state is distinct from 'completed'), false) into v_blocked
    from unnest(p_depends_on) d(id) left join :PGONCE_SCHEMA.jobs j on j.id = d.id;
  end if;
  with ins as (
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
    returning *
  )
  select row(ins.*):::PGONCE_SCHEMA.jobs as job,
         ins.state = 'delayed' or (ins.state = 'waiting' and not exists (
           select 1 from :PGONCE_SCHEMA.jobs w
           where w.queue = p_queue and w.state = 'waiting' and w.run_at <= now())) as wake
  into v_row
  from ins;
  if not found then
    return null;
  end if;
  if v_blocked then
    insert into :PGONCE_SCHEMA.job_dependencies (job_id, depends_on)
    select (v_row.job).id, d from unnest(p_depends_on) d on conflict do nothing;
  end if;
  if v_row.wake then
    perform pg_notify(:PGONCE_CHANNEL, p_queue);
  end if;
  return v_row.job;
end
$$;

create function :PGONCE_SCHEMA._reject(p_error text, p_raise boolean) returns void
language plpgsql as $$
begin
  if p_raise then
    raise exception 'pgonce: % (%)', p_error,
      case p_error when 'EXTEND_NOT_PENDING' then 'Duplicate unique_key (extended TTL)'
      when 'REPLACE_HAS_DEPENDENTS' then 'the owner has a live dependent'
      else 'a dependency does not exist' end
      using errcode = 'PO001', detail = p_error;
  end if;
end
$$;

-- The admission rules for one job (docs/deduplication.md; docs/architecture.md, "The rules, each written once"). A rejection
-- (error EXTEND_NOT_PENDING, REPLACE_HAS_DEPENDENTS, DEPENDENCY_NOT_FOUND)
-- writes nothing; it raises SQLSTATE PO001 unless raise_rejection is false,
-- in which case it comes back in the error column with the key's owner.
create function :PGONCE_SCHEMA.add_job(
  queue text, name text, data jsonb default '{}'::jsonb, job_id text default null,
  dedup_id text default null, dedup_ttl_ms bigint default null,
  dedup_extend boolean default false, dedup_replace boolean default false,
  delay_ms bigint default null, priority integer default null,
  max_attempts integer default null, backoff jsonb default null,
  depends_on bigint[] default null, raise_rejection boolean default true
) returns :PGONCE_SCHEMA.admission
language plpgsql as $$
#variable_conflict use_column
declare
  p_queue alias for $1;
  p_name alias for $2;
  p_data alias for $3;
  p_job_id alias for $4;
  p_dedup_id alias for $5;
  p_dedup_ttl_ms alias for $6;
  p_extend alias for $7;
  p_replace alias for $8;
  p_delay_ms alias for $9;
  p_priority alias for $10;
  p_max_attempts alias for $11;
  p_backoff alias for $12;
  p_depends_on alias for $13;
  p_raise alias for $14;
  v_job :PGONCE_SCHEMA.jobs;
  v_owner :PGONCE_SCHEMA.jobs;
  v_key :PGONCE_SCHEMA.dedup_keys;
  v_held boolean;
  v_expires timestamptz;
begin
  if coalesce(p_extend, false) and p_dedup_ttl_ms is null and not coalesce(p_replace, false) then
    raise exception 'pgonce: dedup_extend needs dedup_ttl_ms' using errcode = '22023';
  end if;
  if p_depends_on is not null and exists (
    select 1 from unnest(p_depends_on) d(id)
    where not exists (select 1 from :PGONCE_SCHEMA.jobs j where j.id = d.id)
  ) then
    perform :PGONCE_SCHEMA._reject('DEPENDENCY_NOT_FOUND', p_raise);
      return row(null::integer, null::text, 'DEPENDENCY_NOT_FOUND'::text, null):::PGONCE_SCHEMA.admission;
  end if;

  if p_dedup_id is null then
    loop
      v_job := :PGONCE_SCHEMA._insert_job(p_queue, p_name, p_data, p_job_id, null,
        p_delay_ms, p_priority, p_max_attempts, p_backoff, p_depends_on);
      if v_job.id is not null then
        return row(null::integer, 'added'::text, null::text, v_job):::PGONCE_SCHEMA.admission;
      end if;
      -- The jobId is live: answer with that generation (or, if it has just
      -- gone terminal, try the insert again).
      select * into v_owner from :PGONCE_SCHEMA.jobs
      where job_id = p_job_id and state in ('waiting', 'delayed', 'waiting-children', 'active');
      if found then
        return row(null::integer, 'duplicate-job-id'::text, null::text, v_owner):::PGONCE_SCHEMA.admission;
      end if;
    end loop;
  end if;

  loop
    -- jobId first: a live generation answers, whatever the key says.
    if p_job_id is not null then
      select * into v_owner from :PGONCE_SCHEMA.jobs
      where job_id = p_job_id and state in ('waiting', 'delayed', 'waiting-children', 'active');
      if found then
        return row(null::integer, 'duplicate-job-id'::text, null::text, v_owner):::PGONCE_SCHEMA.admission;
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
        return row(null::integer, 'duplicate-key'::text, null::text, v_owner):::PGONCE_SCHEMA.admission;
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
          perform :PGONCE_SCHEMA._reject('EXTEND_NOT_PENDING', p_raise);
      return row(null::integer, null::text, 'EXTEND_NOT_PENDING'::text, v_owner):::PGONCE_SCHEMA.admission;
        end if;
        update :PGONCE_SCHEMA.dedup_keys
        set expires_at = now() + make_interval(secs => p_dedup_ttl_ms / 1000.0)
        where queue = p_queue and key = p_dedup_id;
        return row(null::integer, 'extended'::text, null::text, v_owner):::PGONCE_SCHEMA.admission;
      end if;
      return row(null::integer, 'duplicate-key'::text, null::text, v_owner):::PGONCE_SCHEMA.admission;
    end if;

    if v_held and exists (
      select 1 from :PGONCE_SCHEMA.job_dependencies d
      join :PGONCE_SCHEMA.jobs c on c.id = d.job_id
      where d.depends_on = v_owner.id
        and c.state in ('waiting', 'delayed', 'waiting-children', 'active')
    ) then
      perform :PGONCE_SCHEMA._reject('REPLACE_HAS_DEPENDENTS', p_raise);
      return row(null::integer, null::text, 'REPLACE_HAS_DEPENDENTS'::text, v_owner):::PGONCE_SCHEMA.admission;
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
      return row(null::integer, 'added'::text, null::text, v_job):::PGONCE_SCHEMA.admission;
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
    return row(null::integer, case when v_held then 'replaced' else 'added' end::text, null::text, v_job):::PGONCE_SCHEMA.admission;
  end loop;
end
$$;

-- addBulk: one statement, all-or-nothing. Items are jsonb objects with keys
-- name, data, jobId, dedupId, dedupTtlMs, extend, replace, delayMs, priority,
-- attempts, backoff, dependsOn, at. Items without jobId, key or dependencies go
-- in one set-based INSERT; the others are admitted one by one through
-- add_job(), in array order. On a rejection the whole batch is rolled back and
-- a single row carries the error (the caller's transaction stays usable).
-- Concurrent batches avoid deadlocks when each sends its keyed items sorted by
-- the key (else jobId) they lock, as queue.addBulk does.
create function :PGONCE_SCHEMA.add_jobs(p_queue text, p_items jsonb)
returns setof :PGONCE_SCHEMA.admission
language plpgsql as $$
declare
  v_wake boolean := false;
  v_item jsonb;
  v_ord integer;
  v_res :PGONCE_SCHEMA.admission;
  v_rejected :PGONCE_SCHEMA.admission;
  v_plain :PGONCE_SCHEMA.admission[] := '{}';
  v_ids bigint[];
  v_pos integer[];
  v_keyed :PGONCE_SCHEMA.admission[] := '{}';
begin
  begin
    -- Ids are drawn per item first, so that results can be matched to input
    -- positions by primary key (a join of the INSERT's output to the input
    -- would be planned as a nested loop: quadratic in the batch size).
    select coalesce(array_agg(nextval(':PGONCE_SCHEMA.job_ids') order by e.ord), '{}'),
           coalesce(array_agg(e.ord::integer order by e.ord), '{}')
    into v_ids, v_pos
    from jsonb_array_elements(p_items) with ordinality e(item, ord)
    where e.item->'jobId' is null and e.item->'dedupId' is null and e.item->'dependsOn' is null;

    if cardinality(v_ids) > 0 then
      with ins as (
        insert into :PGONCE_SCHEMA.jobs (id, queue, name, data, state, run_at, priority, max_attempts, backoff)
        select o.id, p_queue, it->>'name', coalesce(it->'data', '{}'::jsonb),
          case when coalesce((it->>'delayMs')::bigint, 0) > 0 then 'delayed' else 'waiting' end,
          now() + make_interval(secs => coalesce((it->>'delayMs')::bigint, 0) / 1000.0),
          coalesce((it->>'priority')::integer, 0), coalesce((it->>'attempts')::integer, 1), it->'backoff'
        from unnest(v_ids, v_pos) o(id, pos), lateral (select p_items->(o.pos - 1) as it) i
        returning state
      )
      select coalesce(bool_or(ins.state = 'delayed'), false) or not exists (
               select 1 from :PGONCE_SCHEMA.jobs w
               where w.queue = p_queue and w.state = 'waiting' and w.run_at <= now())
      into v_wake
      from ins;
      select array_agg(row(coalesce((p_items->(o.pos - 1)->>'at')::integer, o.pos), 'added', null, j):::PGONCE_SCHEMA.admission)
      into v_plain
      from unnest(v_ids, v_pos) o(id, pos) join :PGONCE_SCHEMA.jobs j on j.id = o.id;
    end if;

    for v_item, v_ord in
      select e.item, coalesce((e.item->>'at')::integer, e.ord::integer)
      from jsonb_array_elements(p_items) with ordinality e(item, ord)
      where e.item->'jobId' is not null or e.item->'dedupId' is not null or e.item->'dependsOn' is not null
      order by e.ord
    loop
      v_res := :PGONCE_SCHEMA.add_job(p_queue, v_item->>'name', coalesce(v_item->'data', '{}'::jsonb),
        v_item->>'jobId', v_item->>'dedupId', (v_item->>'dedupTtlMs')::bigint,
        coalesce((v_item->>'extend')::boolean, false), coalesce((v_item->>'replace')::boolean, false),
        (v_item->>'delayMs')::bigint, (v_item->>'priority')::integer, (v_item->>'attempts')::integer,
        v_item->'backoff',
        (select array_agg(d::bigint) from jsonb_array_elements_text(v_item->'dependsOn') d),
        false);
      v_res.ordinal := v_ord;
      if v_res.error is not null then
        v_rejected := v_res;
        raise exception 'pgonce: batch item % rejected: %', v_ord, v_res.error using errcode = 'PO001';
      end if;
      v_keyed := array_append(v_keyed, v_res);
    end loop;
  exception when sqlstate 'PO001' then
    return next v_rejected;
    return;
  end;

  if v_wake then
    perform pg_notify(:PGONCE_CHANNEL, p_queue);
  end if;
  return query
    select * from unnest(v_plain)
    union all
    select * from unnest(v_keyed)
    order by 1;
end
$$;

-- Moves dependents of the just-completed jobs p_done out of waiting-children
-- when every dependency has completed (p_done counts as completed: the caller
-- completes them in the same statement). Returns every waiting dependent found
-- and whether it was promoted (a dependent still waiting on a parent that a
-- concurrent transaction is completing is promoted by the caller's follow-up
-- or by housekeeping).
create function :PGONCE_SCHEMA._promote_dependents(p_done bigint[])
returns table (job_id bigint, queue text, promoted boolean)
language plpgsql volatile as $$
begin
  return query
  with waiting as (
    select c.id, c.queue from :PGONCE_SCHEMA.jobs c
    where c.id = any(array(
        select dep.job_id from :PGONCE_SCHEMA.job_dependencies dep
        where dep.depends_on = any(p_done)))
      and c.state = 'waiting-children'
  ), moved as (
    update :PGONCE_SCHEMA.jobs c
    -- clock_timestamp(): the dependent may have been added after this transaction began.
    set state = case when c.run_at <= clock_timestamp() then 'waiting' else 'delayed' end
    from waiting w
    where c.id = w.id and c.state = 'waiting-children'
      and not exists (
        select 1 from :PGONCE_SCHEMA.job_dependencies dep
        join :PGONCE_SCHEMA.jobs p on p.id = dep.depends_on
        where dep.job_id = c.id and p.state <> 'completed' and p.id <> all(p_done))
    returning c.id
  )
  select w.id, w.queue, exists (select 1 from moved m where m.id = w.id) from waiting w;
end
$$;

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
