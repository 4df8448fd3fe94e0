--! Previous: sha1:d06942a5117fb0c46069f3471a0ca0947dce71c9
--! Hash: sha1:32b96a315ca16d8e240cf5fccc6fb7f0cbcc195f
--! Message: run-at

-- An absolute due time (runAt) beside a delay (docs/workers.md#delayed-jobs-runat-and-promotejob).

-- The delay, in whole ms from now() (the database clock), after which a job added now is due at p_run_at: a time in
-- the past is a delay of 0 (due now). Rounded up, so that _due_at() of it is never before p_run_at. Every add path
-- turns a runAt into a delay with it, so that _new_job_state() and _due_at() stay the one rule for a new job.
create or replace function :PGONCE_SCHEMA._delay_until(p_run_at timestamptz) returns bigint
language sql stable parallel safe as $$
  select case when p_run_at is null then null
              else greatest(0, ceil(extract(epoch from (p_run_at - now())) * 1000))::bigint end
$$;

-- add_job() gains run_at: the old signature goes first, as a second one beside it would make every call that leaves
-- the trailing arguments out ambiguous.
drop function if exists :PGONCE_SCHEMA.add_job(text, text, jsonb, text, text, bigint, boolean, boolean, bigint,
  integer, integer, jsonb, bigint[], boolean, text);

-- Adds one job with the rules of docs/deduplication.md: the SQL face of queue.add, for triggers, psql and any client.
-- A rejection (error EXTEND_NOT_PENDING, REPLACE_HAS_DEPENDENTS, DEPENDENCY_NOT_FOUND) writes nothing; it raises
-- SQLSTATE PO001 unless raise_rejection is false, in which case it comes back in the error column. run_at is an
-- absolute due time instead of delay_ms (both: SQLSTATE 22023).
create function :PGONCE_SCHEMA.add_job(
  queue text, name text, data jsonb default '{}'::jsonb, job_id text default null,
  dedup_id text default null, dedup_ttl_ms bigint default null,
  dedup_extend boolean default false, dedup_replace boolean default false,
  delay_ms bigint default null, priority integer default null,
  max_attempts integer default null, backoff jsonb default null,
  depends_on bigint[] default null, raise_rejection boolean default true, trace_context text default null,
  run_at timestamptz default null
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
    coalesce($7, false), coalesce($8, false), coalesce($9, :PGONCE_SCHEMA._delay_until($16)), $10, $11, $12, $13, $15) a;
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
-- job ids). An item that is not an object, has any other key (a typo must never drop a guarantee silently), or has
-- both delayMs and runAt, is refused with SQLSTATE 22023 and nothing is added. All or nothing, as _add_jobs: a
-- rejected item raises PO001 (detail: its error), unless raise_rejection is false, in which case it comes back as the
-- only row.
create or replace function :PGONCE_SCHEMA.add_jobs(queue text, items jsonb, raise_rejection boolean default true)
returns setof :PGONCE_SCHEMA.admission
language plpgsql volatile as $$
declare
  v_bad jsonb;
  v_answer :PGONCE_SCHEMA.admission;
begin
  select e into v_bad from jsonb_array_elements(items) e
  where jsonb_typeof(e) <> 'object'
     or e - '{name,data,jobId,dedupId,dedupTtlMs,extend,replace,delayMs,runAt,priority,attempts,backoff,dependsOn}'::text[] <> '{}'::jsonb
  limit 1;
  if found then
    raise exception 'pgonce: add_jobs() items are objects with the keys name, data, jobId, dedupId, dedupTtlMs, extend, replace, delayMs, runAt, priority, attempts, backoff, dependsOn (item: %)',
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
