--! Previous: sha1:36289d908e72523fd5761ea9a58353d0b4cc94d7
--! Hash: sha1:547a51fce81e5ca3130be195027ff238237cef98
--! Message: a single add's one-row INSERT

-- A single add inserts its job with a one-row INSERT in _admit_one() (000004) instead of calling _insert_jobs() with
-- one-element arrays: the call's RETURN QUERY, the unnest of ten arrays and the sort cost ~30 µs of a ~165 µs keyed
-- add on the server (18%; bench/README.md, "A single add's INSERT"). The columns and every rule (_new_job_state,
-- _due_at, the default priority and attempts, the live-jobId conflict) are the same functions _insert_jobs() uses,
-- which batches keep. add_job() sends a plain item through _admit_one() too (the same INSERT, no decision, no lock),
-- one path instead of two.

create or replace function :PGONCE_SCHEMA._admit_one(
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

    -- One row, so no arrays: the same columns and rules as _insert_jobs() (whose call cost ~30 µs here).
    insert into :PGONCE_SCHEMA.jobs
      (id, queue, name, data, job_id, dedup_key, state, run_at, priority, max_attempts, backoff, trace_context)
    values (nextval(':PGONCE_SCHEMA.job_ids'), p_queue, p_name, coalesce(p_data, '{}'::jsonb), p_job_id, p_dedup_id,
      :PGONCE_SCHEMA._new_job_state(v_blocked, p_delay_ms), :PGONCE_SCHEMA._due_at(p_delay_ms),
      coalesce(p_priority, :PGONCE_SCHEMA._default_priority()),
      coalesce(p_max_attempts, :PGONCE_SCHEMA._default_max_attempts()), p_backoff, p_trace_context)
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
begin
  -- One item needs no savepoint; only an extend, a replace or a dependency takes locks first. A plain item goes
  -- through _admit_one() too: with no jobId, key or dependency it is its INSERT alone.
  if coalesce($7, false) or coalesce($8, false) or $13 is not null then
    perform :PGONCE_SCHEMA._lock_admission($1, array[$4], array[$5], array[coalesce($7, false)],
      array[coalesce($8, false)], array[$13::text]);
  end if;
  select 1, a.outcome, a.error, a.job into v_answer from :PGONCE_SCHEMA._admit_one($1, $2, $3, $4, $5, $6,
    coalesce($7, false), coalesce($8, false), $9, $10, $11, $12, $13, $15) a;
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
