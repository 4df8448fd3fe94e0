--! Previous: sha1:d05008bdee6d8db590106fa5100e71559de18e1b
--! Hash: sha1:272f1dd374989647b894c53d0930e7c3f9d208ba
--! Message: hand-off to listed idle workers

-- The hand-off, back without a table every add reads (bench/README.md, "Hand-off"): a plain add into a queue whose
-- worker sleeps inserts the job already active for that worker (attempt counted, lock token, lease, as a claim would)
-- and the NOTIFY carries the job, so the handler starts without a claim's round trip.
--
-- Who can take a hand-off: a worker's LISTEN session records itself in worker_listeners once, when it connects (not
-- on every sleep: rows written once per connection leave no dead versions for adds to walk however long another
-- transaction holds back the xmin horizon). While it sleeps with a free handler slot, besides one of the queue's four
-- idle slots (000004) it holds a session advisory lock of its own, _handoff_key(worker id). An add looks at the
-- listeners only when some idle slot is held, and picks the first one whose lock is held.
--
-- The NOTIFY names the worker and the backend pid of its LISTEN session: only that session of that worker takes the
-- job. A worker with no free slot, or closing, gives it back (run not counted). A notification that never arrives (the
-- LISTEN session died between the add's commit and the delivery) leaves the job active for that worker: once
-- reconnected it gives back what it does not hold (sql/lost-hand-offs.sql); if the worker died, housekeeping rescues
-- the job when its lease expires, as it rescues the job of a crashed worker.

create table :PGONCE_SCHEMA.worker_listeners (
  worker_id   text primary key,
  queue       text not null,
  backend_pid integer not null,
  lease_ms    bigint not null check (lease_ms > 0),
  connected_at timestamptz not null default now()
);
comment on table :PGONCE_SCHEMA.worker_listeners is
  'One row per worker LISTEN session (written when it connects, deleted at close or by the next worker of the queue to connect once the session is gone). A plain add hands its job to a listed worker whose _handoff_key advisory lock is held (it sleeps with a free slot).';
create index worker_listeners_queue on :PGONCE_SCHEMA.worker_listeners (queue);

-- The session advisory lock a sleeping worker with a free slot holds: it takes hand-offs.
create function :PGONCE_SCHEMA._handoff_key(p_worker_id text) returns bigint
language sql immutable parallel safe as $$
  select hashtextextended(:PGONCE_CHANNEL || ':handoff:' || p_worker_id, 0)
$$;

-- The worker a plain add of p_queue hands its job to, or null: the add may hand off (p_allowed: its own statement,
-- not inside a caller's transaction, whose commit could come after the lease), the job is due now, its payload fits a
-- NOTIFY (8000 bytes: data, backoff and trace context within 3,500 bytes leave room for jsonb's spacing and the
-- rest), the queue is not paused, and a listed worker holds its hand-off lock. One check of the four idle slots
-- (_idle_worker_waits, ~3 µs) comes before any row is read.
create function :PGONCE_SCHEMA._hand_off_target(p_queue text, p_allowed boolean, p_delay_ms bigint, p_data text,
  p_backoff text, p_trace_context text) returns :PGONCE_SCHEMA.worker_listeners
language plpgsql volatile as $$
declare
  v :PGONCE_SCHEMA.worker_listeners;
begin
  if not coalesce(p_allowed, false) or coalesce(p_delay_ms, 0) > 0
     or octet_length(coalesce(p_data, '')) + octet_length(coalesce(p_backoff, '')) + octet_length(coalesce(p_trace_context, '')) > 3500
     or not :PGONCE_SCHEMA._idle_worker_waits(p_queue) then
    return null;
  end if;
  -- _queue_paused()'s rule, read through this function's cached plan: a call of that SQL function plans its body
  -- again in every statement (~70 µs on PostgreSQL 15, a tenth of the add).
  if exists (select 1 from :PGONCE_SCHEMA.queue_settings s where s.queue = p_queue and s.paused) then
    return null;
  end if;
  for v in select * from :PGONCE_SCHEMA.worker_listeners l where l.queue = p_queue loop
    if not pg_try_advisory_lock_shared(:PGONCE_SCHEMA._handoff_key(v.worker_id)) then
      return v;
    end if;
    perform pg_advisory_unlock_shared(:PGONCE_SCHEMA._handoff_key(v.worker_id));
  end loop;
  return null;
end
$$;

-- Sends job j (inserted active for worker p_worker_id) to that worker's LISTEN session p_pid: NOTIFY
-- '!handoff <worker id> <pid> <the job as the claim returns it, JSON, id as text>', delivered at commit.
create function :PGONCE_SCHEMA._hand_off(j :PGONCE_SCHEMA.jobs, p_worker_id text, p_pid integer) returns boolean
language plpgsql volatile as $$
begin
  perform pg_notify(:PGONCE_CHANNEL, '!handoff ' || p_worker_id || ' ' || p_pid || ' '
    || (select (to_jsonb(x) || jsonb_build_object('id', x.id::text))::text from :PGONCE_SCHEMA._as_claimed(j) x));
  return true;
end
$$;

-- The same job defaults as 000004's, in plpgsql: PostgreSQL 15 cannot inline a SQL function that returns a record, and
-- plans its body again in every statement that calls it (~30 µs of every plain add); a plpgsql function keeps its
-- compiled form for the session.
create or replace function :PGONCE_SCHEMA._job_defaults(out priority integer, out max_attempts integer)
language plpgsql immutable parallel safe as $$
begin
  priority := 0;
  max_attempts := 1;
end
$$;
