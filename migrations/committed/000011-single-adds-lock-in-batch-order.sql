--! Previous: sha1:bc8c0fabdc3530eae8248d37ea9c971682711d13
--! Hash: sha1:6a412b3ae86418b86e2385bdb51e8370c5d45454
--! Message: single adds lock in the batch order

-- A single add that extends or replaces a key, or names dependsOn parents, locks its rows in the same order as a
-- batch does, and so does a one-item batch. _admit_one() alone locks the key row and then the owner it deletes, a
-- batch (000009) the owner and then the key row: a single add and a batch replacing the same key deadlocked (SQLSTATE
-- 40P01; found by `npm run chaos`, test/queue.add-lock-order.test.ts). The locking rule now lives in one function,
-- _lock_admission(), that both call.

-- The locks an add takes before it decides, the same for a single add and a batch: first the sorted advisory locks
-- on its keys and jobIds (when two items could meet in one batch, or an item extends or replaces its key: the owner
-- read below before its row is locked then cannot change under a concurrent replace; test/dedup.concurrency.test.ts,
-- 50 concurrent replaces of one key), then, when an item extends, replaces or depends, its rows in the workers' order
-- (_lock_batch_rows(): the pending owners and the parents by id, then the key rows).
create function :PGONCE_SCHEMA._lock_admission(p_queue text, p_job_ids text[], p_dedup_ids text[], p_extends boolean[],
  p_replaces boolean[], p_depends_on text[]) returns void
language plpgsql volatile as $$
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

create or replace function :PGONCE_SCHEMA.add_job(
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
  -- One item needs no savepoint, and a plain one no lock: the same rules, called directly.
  if $4 is null and $5 is null and $13 is null then
    select * into v_job from :PGONCE_SCHEMA._insert_jobs($1, array[$2], array[$3], null, null, array[$9], array[$10],
      array[$11], array[$12], null, array[$15]);
    v_answer := row(1, 'added', null, v_job);
  else
    if coalesce($7, false) or coalesce($8, false) or $13 is not null then
      perform :PGONCE_SCHEMA._lock_admission($1, array[$4], array[$5], array[coalesce($7, false)],
        array[coalesce($8, false)], array[$13::text]);
    end if;
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

create or replace function :PGONCE_SCHEMA._add_jobs(
  p_queue text, p_names text[], p_datas jsonb[], p_job_ids text[], p_dedup_ids text[], p_dedup_ttls_ms bigint[],
  p_extends boolean[], p_replaces boolean[], p_delays_ms bigint[], p_priorities integer[], p_max_attempts integer[],
  p_backoffs jsonb[], p_depends_on text[], p_trace_contexts text[]
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
