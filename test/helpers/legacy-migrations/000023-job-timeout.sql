--! Previous: sha1:32b96a315ca16d8e240cf5fccc6fb7f0cbcc195f
--! Hash: sha1:f62b04c9fca570dad0158f8cbc7fb46c4c797487
--! Message: job-timeout

-- A per-job timeout (timeoutMs; docs/workers.md#timeouts). A run's deadline is on the database clock: the claim sets
-- timeout_at = started_at + the job's timeout_ms (else the claiming worker's timeoutMs), caps the lease at it, a
-- heartbeat never extends the lease past it (sql/heartbeat.sql) and a completion after it is refused
-- (sql/complete-jobs.sql), so that a handler in a frozen or busy process cannot complete its job late.

alter table :PGONCE_SCHEMA.jobs
  add column timeout_ms integer check (timeout_ms > 0),
  add column timeout_at timestamptz;
comment on column :PGONCE_SCHEMA.jobs.timeout_ms is
  'queue.add''s timeoutMs: how long a run may take, in ms; null: the worker''s timeoutMs, if any.';
comment on column :PGONCE_SCHEMA.jobs.timeout_at is
  'The current (or last) run''s deadline, set by the claim: started_at + timeout_ms, else the worker''s timeoutMs.';

-- The add functions gain the timeout: the old signatures go first, as a second function beside each would make every
-- call that leaves the trailing arguments out ambiguous.
drop function :PGONCE_SCHEMA.add_job(text, text, jsonb, text, text, bigint, boolean, boolean, bigint, integer, integer,
  jsonb, bigint[], boolean, text, timestamptz);
drop function :PGONCE_SCHEMA._add_jobs(text, text[], jsonb[], text[], text[], bigint[], boolean[], boolean[],
  bigint[], integer[], integer[], jsonb[], text[], text[]);
drop function :PGONCE_SCHEMA._admit_batch(text, text[], jsonb[], text[], text[], bigint[], boolean[], boolean[],
  bigint[], integer[], integer[], jsonb[], text[], text[]);
drop function :PGONCE_SCHEMA._admit_one(text, text, jsonb, text, text, bigint, boolean, boolean, bigint, integer,
  integer, jsonb, bigint[], text);

-- _admit_one() of the baseline, its INSERT with the timeout (p_timeout_ms).
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

-- _admit_batch() of the baseline, with each item's timeout.
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

-- _add_jobs() of the baseline, with each item's timeout (p_timeouts_ms; null: none has one).
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

-- add_job() of the baseline, with timeout_ms: how long a run may take, in ms (> 0; the CHECK of jobs.timeout_ms).
create function :PGONCE_SCHEMA.add_job(
  queue text, name text, data jsonb default '{}'::jsonb, job_id text default null,
  dedup_id text default null, dedup_ttl_ms bigint default null,
  dedup_extend boolean default false, dedup_replace boolean default false,
  delay_ms bigint default null, priority integer default null,
  max_attempts integer default null, backoff jsonb default null,
  depends_on bigint[] default null, raise_rejection boolean default true, trace_context text default null,
  run_at timestamptz default null, timeout_ms integer default null
) returns :PGONCE_SCHEMA.admission
language plpgsql volatile as $$
declare
  v_answer :PGONCE_SCHEMA.admission;
begin
  if $9 is not null and $16 is not null then
    raise exception 'pgonce: give delay_ms or run_at, not both' using errcode = '22023';
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

-- add_jobs() of the baseline; an item may also have timeoutMs.
create or replace function :PGONCE_SCHEMA.add_jobs(queue text, items jsonb, raise_rejection boolean default true)
returns setof :PGONCE_SCHEMA.admission
language plpgsql volatile as $$
declare
  v_bad jsonb;
  v_answer :PGONCE_SCHEMA.admission;
begin
  select e into v_bad from jsonb_array_elements(items) e
  where jsonb_typeof(e) <> 'object'
     or e - '{name,data,jobId,dedupId,dedupTtlMs,extend,replace,delayMs,runAt,priority,attempts,backoff,dependsOn,timeoutMs}'::text[] <> '{}'::jsonb
  limit 1;
  if found then
    raise exception 'pgonce: add_jobs() items are objects with the keys name, data, jobId, dedupId, dedupTtlMs, extend, replace, delayMs, runAt, priority, attempts, backoff, dependsOn, timeoutMs (item: %)',
      left(v_bad::text, 200) using errcode = '22023';
  end if;
  select e into v_bad from jsonb_array_elements(items) e where e ? 'delayMs' and e ? 'runAt' limit 1;
  if found then
    raise exception 'pgonce: add_jobs() items give delayMs or runAt, not both (item: %)', left(v_bad::text, 200)
      using errcode = '22023';
  end if;
  for v_answer in
    select a.* from (
      select array_agg(e->>'name' order by o) n, array_agg(e->'data' order by o) d, array_agg(e->>'jobId' order by o) j,
        array_agg(e->>'dedupId' order by o) k, array_agg((e->>'dedupTtlMs')::bigint order by o) t,
        array_agg((e->>'extend')::boolean order by o) x, array_agg((e->>'replace')::boolean order by o) r,
        array_agg(coalesce((e->>'delayMs')::bigint, :PGONCE_SCHEMA._delay_until(case jsonb_typeof(e->'runAt')
            when 'number' then to_timestamp((e->>'runAt')::float8 / 1000) else (e->>'runAt')::timestamptz end))
          order by o) dl,
        array_agg((e->>'priority')::integer order by o) p,
        array_agg((e->>'attempts')::integer order by o) as at, array_agg(e->'backoff' order by o) b,
        array_agg(case when e ? 'dependsOn' then translate((e->'dependsOn')::text, '[]"', '{}') end order by o) dep,
        array_agg((e->>'timeoutMs')::integer order by o) tm
      from jsonb_array_elements(items) with ordinality e(e, o)
    ) i, :PGONCE_SCHEMA._add_jobs($1, i.n, i.d, i.j, i.k, i.t, i.x, i.r, i.dl, i.p, i.at, i.b, i.dep, null, i.tm) a
  loop
    if v_answer.error is not null and raise_rejection then
      raise exception 'pgonce: batch item % rejected: %', v_answer.ordinal, v_answer.error
        using errcode = 'PO001', detail = v_answer.error::text;
    end if;
    return next v_answer;
  end loop;
end
$$;
