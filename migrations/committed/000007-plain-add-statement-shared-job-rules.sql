--! Previous: sha1:cd7368857a7fe5d6540bd3f3fbb8a1ed47e4e589
--! Hash: sha1:d05008bdee6d8db590106fa5100e71559de18e1b
--! Message: plain add statement, shared job rules

-- A plain add (one job with no jobId, dedup key or dependency: nothing to decide) gets a statement of its own,
-- sql/add-plain-job.sql: one INSERT and the wake-up rule, without add_job()'s and _insert_jobs()' plpgsql layers and
-- arrays. Measured (bench/README.md, "Plain adds"): from 16 connections 1.25-1.45x add_job() per second. So that it and
-- _insert_jobs() cannot disagree on what a new job is, the two column rules they share move into functions of their
-- own (SQL, inlined where they are used):
--   _new_job_state: waiting-children while it waits on parents, delayed while its delay runs, else waiting;
--   _due_at: when a job added now with that delay is due.
-- The defaults stay _job_defaults(); the answer shape stays _answer().

create function :PGONCE_SCHEMA._new_job_state(p_blocked boolean, p_delay_ms bigint) returns text
language sql immutable parallel safe as $$
  select case when coalesce(p_blocked, false) then 'waiting-children'
              when coalesce(p_delay_ms, 0) > 0 then 'delayed' else 'waiting' end
$$;

create function :PGONCE_SCHEMA._due_at(p_delay_ms bigint) returns timestamptz
language sql stable parallel safe as $$
  select now() + make_interval(secs => coalesce(p_delay_ms, 0) / 1000.0)
$$;

-- As in 000004, with the state and the due time from the rules above.
create or replace function :PGONCE_SCHEMA._insert_jobs(
  p_queue text, p_names text[], p_datas jsonb[], p_job_ids text[], p_dedup_ids text[], p_delays_ms bigint[],
  p_priorities integer[], p_max_attempts integer[], p_backoffs jsonb[], p_blocked boolean[], p_trace_contexts text[]
) returns setof :PGONCE_SCHEMA.jobs
language plpgsql volatile as $$
begin
  return query
  insert into :PGONCE_SCHEMA.jobs
    (id, queue, name, data, job_id, dedup_key, state, run_at, priority, max_attempts, backoff, trace_context)
  select nextval(':PGONCE_SCHEMA.job_ids'), p_queue, i.name, coalesce(i.data, '{}'::jsonb), i.job_id, i.dedup_id,
    :PGONCE_SCHEMA._new_job_state(i.blocked, i.delay_ms), :PGONCE_SCHEMA._due_at(i.delay_ms),
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
