--! Previous: sha1:518e960294f28836812e7a8d72aa8358dfaa3908
--! Hash: sha1:09a76fbd8184eea313d7fbc3a32fc20cde2acc79
--! Message: promote dependents with a fresh snapshot

-- Dependents are never stranded by a parent completing while they are added:
-- add_job locks the parents it depends on while reading their states, and
-- completion promotes dependents through _promote_dependents(), a VOLATILE
-- function, so it reads with a fresh snapshot and sees a dependent committed
-- while the completion waited for that lock.

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
