--! Previous: sha1:de36b56fbead431505040b8d5b04c603ba27bd4a
--! Hash: sha1:f3064dfc753deeaeb9a96506af0718019670018b
--! Message: lock parents, drop jobs_finished

-- A job added with dependsOn locks its parents while it reads their states
-- (no more dependents stranded in waiting-children by a parent completing at
-- the same moment), and the jobs_finished index goes: no query reads it, and
-- it cost one index write per completed or failed job (retention, when it
-- comes, brings the index it needs).

drop index :PGONCE_SCHEMA.jobs_finished;

create or replace function :PGONCE_SCHEMA._insert_job(
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
    -- the read below (and is seen completed) or waits for this insert to
    -- commit (and then promotes it). Without the lock the job could be left in
    -- waiting-children until housekeeping found it.
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
