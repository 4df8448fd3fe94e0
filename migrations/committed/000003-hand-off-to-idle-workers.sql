--! Previous: sha1:728d7e0ac6f996346c6a66347330c34e7c79a36e
--! Hash: sha1:c7f694e780d9ccf6a0b19d6f1fd5395a34b43fd1
--! Message: hand-off to idle workers

-- Hand-off: a job added to an idle queue goes straight to a sleeping worker.
--
-- A worker whose claim came back empty signs up in idle_workers (the claim
-- statement does it, one row per empty claim). add_job() for a job with no
-- deduplication key, due now, on a queue with no due waiting job, takes the
-- oldest live sign-up (FOR UPDATE SKIP LOCKED), inserts the job already
-- active for that worker (lock token, lease, attempt counted, exactly as a
-- claim would) and NOTIFYs 'handoff <worker> <job as JSON>': the worker starts
-- the handler without a claim round trip. Everything else still goes through
-- the claim statement.
--
-- A sign-up is live while the worker's LISTEN session holds the session
-- advisory lock alive_key (add_job() tests it with a shared try-lock: taken
-- means alive) and until expires_at (refreshed by every empty poll). A job
-- handed to a worker that died meanwhile is rescued when its lease expires.

create table :PGONCE_SCHEMA.idle_workers (
  id          bigint generated always as identity primary key,
  queue       text not null,
  worker_id   text not null,
  alive_key   bigint not null,
  lease_ms    bigint not null,
  expires_at  timestamptz not null
);
comment on table :PGONCE_SCHEMA.idle_workers is
  'Workers asleep on an empty queue, ready for a job handed to them by add_job(); live while their LISTEN session holds pg_advisory_lock(alive_key) and expires_at is ahead.';
create index idle_workers_queue on :PGONCE_SCHEMA.idle_workers (queue, id);

-- Inserts one job unless its jobId is live (then returns null). A job due now
-- with no dedup key, added while the queue has no due waiting job, is handed
-- to a live idle worker if there is one (see idle_workers). Otherwise wakes
-- idle workers: NOTIFY only when the queue had no due waiting job before this
-- insert (whoever added that one woke them, and busy workers fetch again on
-- their own), or when the job is delayed (workers re-arm their timers). NOTIFY
-- serialises commits, so fewer is faster.
create or replace function :PGONCE_SCHEMA._insert_job(
  p_queue text, p_name text, p_data jsonb, p_job_id text, p_dedup_id text,
  p_delay_ms bigint, p_priority integer, p_max_attempts integer, p_backoff jsonb,
  p_depends_on bigint[]
) returns :PGONCE_SCHEMA.jobs
language plpgsql as $$
declare
  v_blocked boolean := false;
  v_idle boolean := false;
  v_worker :PGONCE_SCHEMA.idle_workers;
  v_to boolean := false;
  v_job :PGONCE_SCHEMA.jobs;
  v_payload text;
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
  if not v_blocked and coalesce(p_delay_ms, 0) <= 0 then
    v_idle := not exists (
      select 1 from :PGONCE_SCHEMA.jobs w
      where w.queue = p_queue and w.state = 'waiting' and w.run_at <= now());
    if v_idle and p_dedup_id is null then
      loop
        select * into v_worker from :PGONCE_SCHEMA.idle_workers r
        where r.queue = p_queue and r.expires_at > now()
        order by r.id limit 1
        for update skip locked;
        exit when not found;
        -- Held by the worker's LISTEN session: alive.
        if not pg_try_advisory_xact_lock_shared(v_worker.alive_key) then
          v_to := true;
          exit;
        end if;
        delete from :PGONCE_SCHEMA.idle_workers where id = v_worker.id;
      end loop;
    end if;
  end if;
  insert into :PGONCE_SCHEMA.jobs
    (queue, name, data, job_id, dedup_key, state, run_at, priority, max_attempts, backoff,
     attempts, lock_token, locked_until, locked_by, started_at)
  values
    (p_queue, p_name, p_data, p_job_id, p_dedup_id,
     case when v_to then 'active'
          when v_blocked then 'waiting-children'
          when coalesce(p_delay_ms, 0) > 0 then 'delayed' else 'waiting' end,
     now() + make_interval(secs => coalesce(p_delay_ms, 0) / 1000.0),
     coalesce(p_priority, 0), coalesce(p_max_attempts, 1), p_backoff,
     case when v_to then 1 else 0 end,
     case when v_to then gen_random_uuid() end,
     case when v_to then clock_timestamp() + make_interval(secs => v_worker.lease_ms / 1000.0) end,
     case when v_to then v_worker.worker_id end,
     case when v_to then now() end)
  on conflict (job_id) where job_id is not null and state in ('waiting', 'delayed', 'waiting-children', 'active')
  do nothing
  returning * into v_job;
  if not found then
    return null;
  end if;
  if v_blocked then
    insert into :PGONCE_SCHEMA.job_dependencies (job_id, depends_on)
    select v_job.id, d from unnest(p_depends_on) d on conflict do nothing;
  end if;
  if v_to then
    delete from :PGONCE_SCHEMA.idle_workers where id = v_worker.id;
    -- The job as the claim statement returns it; a payload too large for
    -- NOTIFY (8000 bytes) carries id and token only, and the worker reads the rest.
    v_payload := json_build_object(
      'id', v_job.id::text, 'queue', v_job.queue, 'name', v_job.name, 'job_id', v_job.job_id,
      'data', v_job.data, 'priority', v_job.priority, 'attempts', v_job.attempts,
      'max_attempts', v_job.max_attempts, 'backoff', v_job.backoff, 'dedup_key', v_job.dedup_key,
      'lock_token', v_job.lock_token, 'last_error', null, 'error_stack', null,
      'run_at_ms', extract(epoch from v_job.run_at)::float8 * 1000,
      'created_at_ms', extract(epoch from v_job.created_at)::float8 * 1000)::text;
    if octet_length(v_payload) + octet_length(v_worker.worker_id) > 7900 then
      v_payload := json_build_object('id', v_job.id::text, 'lock_token', v_job.lock_token)::text;
    end if;
    perform pg_notify(:PGONCE_CHANNEL, 'handoff ' || v_worker.worker_id || ' ' || v_payload);
  elsif v_job.state = 'delayed' or (v_job.state = 'waiting' and v_idle) then
    perform pg_notify(:PGONCE_CHANNEL, p_queue);
  end if;
  return v_job;
end
$$;
