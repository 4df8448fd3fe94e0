-- queue.addBulk of plain items (no jobId, key or dependency: nothing to decide): one INSERT with the rules of
-- _admit_one()'s (_new_job_state, _due_at, the scalar defaults), without its ON CONFLICT (a plain item has no jobId to
-- conflict on), and the wake-up rule; without the per-item admission rows of _add_jobs() either (parsing 1,000 answer
-- rows cost the client more than the INSERT cost the server). Kept for its measurement: a 1,000-item batch 7.8
-- against 12.2 ms through a plpgsql INSERT function and per-item answers (bench/DECISIONS.md#plain-bulk),
-- and ~1.2x a call of one (7.0 against 8.7 ms in a probe). Answered by one row:
-- the new ids in input order, comma-separated; now() in ms (every job's created_at; run_at = created_at + delay); the
-- defaults used for what the items left out. $1 queue, $2 names, $3 the items' data as one JSON array, $4 delays ms,
-- $5 priorities, $6 max attempts, $7 backoffs, $8 trace contexts, $9 timeouts ms, $10 group ids ($4-$10 null when no
-- item sets them).
with ins as (
  insert into :PGONCE_SCHEMA.jobs (id, queue, name, data, state, run_at, priority, max_attempts, backoff, trace_context,
    timeout_ms, group_id)
  select nextval(':PGONCE_SCHEMA.job_ids'), $1, i.name, coalesce($3::jsonb -> (i.ord - 1)::integer, '{}'::jsonb),
    :PGONCE_SCHEMA._new_job_state(false, i.delay_ms), :PGONCE_SCHEMA._due_at(i.delay_ms),
    coalesce(i.priority, :PGONCE_SCHEMA._default_priority()), coalesce(i.max_attempts, :PGONCE_SCHEMA._default_max_attempts()),
    i.backoff, i.trace_context, i.timeout_ms, i.group_id
  from (
    select * from unnest($2::text[], $4::bigint[], $5::integer[], $6::integer[], $7::jsonb[], $8::text[], $9::integer[],
        $10::text[])
      with ordinality as u(name, delay_ms, priority, max_attempts, backoff, trace_context, timeout_ms, group_id, ord)
    order by u.ord
  ) i
  returning id
)
select string_agg(ins.id::text, ',' order by ins.id) as ids, (extract(epoch from now()) * 1000)::float8 as now_ms,
  :PGONCE_SCHEMA._default_priority() as default_priority,
  :PGONCE_SCHEMA._default_max_attempts() as default_max_attempts, :PGONCE_SCHEMA._wake($1) as woken
from ins
