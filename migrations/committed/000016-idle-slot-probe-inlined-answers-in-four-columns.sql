--! Previous: sha1:50b357fd6ce1277e08c82f21350efcf3b14d4a71
--! Hash: sha1:36289d908e72523fd5761ea9a58353d0b4cc94d7
--! Message: idle-slot probe inlined, answers in four columns

-- Whether an idle worker of a queue holds one of its slots (000004), as a SQL function that the planner inlines into
-- the statements calling it: the same expression, without a plpgsql call. The call was ~7 µs of every plain add, about
-- 6% of its time (bench/README.md, "The idle-slot probe, inlined"). Each slot's key is computed where it is used
-- (a hash of the queue's name, well under a µs): a SQL function inlined as an expression cannot hold a variable.
create or replace function :PGONCE_SCHEMA._idle_worker_waits(p_queue text) returns boolean
language sql volatile as $$
  select case
    when not pg_try_advisory_lock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 0)) then true
    when not pg_advisory_unlock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 0)) then true
    when not pg_try_advisory_lock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 1)) then true
    when not pg_advisory_unlock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 1)) then true
    when not pg_try_advisory_lock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 2)) then true
    when not pg_advisory_unlock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 2)) then true
    when not pg_try_advisory_lock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 3)) then true
    when not pg_advisory_unlock_shared(:PGONCE_SCHEMA._idle_slot_key(p_queue, 3)) then true
    else false end
$$;

-- The answer to an add (000004) in four columns instead of ten: a job this call inserted (added, replaced) comes back
-- as the columns the caller cannot know, comma-separated in one text (id, state, priority, max_attempts, run_at in ms,
-- created_at in ms); any other job (a duplicate's owner, an extended one, a rejection's owner) whole, as JSON text
-- with its id as a string. Every column of an answer costs the client and the server about a µs per statement (its
-- description is sent and read with every execution): a single add ~4% faster (bench/README.md, "The answer to an add").
drop function :PGONCE_SCHEMA._answer(:PGONCE_SCHEMA.admission);
create function :PGONCE_SCHEMA._answer(a :PGONCE_SCHEMA.admission)
returns table (ordinal integer, outcome text, error text, job text)
language sql immutable rows 1 as $$
  select a.ordinal, a.outcome, a.error::text,
    case when a.outcome in ('added', 'replaced')
      then concat_ws(',', (a.job).id, (a.job).state, (a.job).priority, (a.job).max_attempts,
        (extract(epoch from (a.job).run_at) * 1000)::float8, (extract(epoch from (a.job).created_at) * 1000)::float8)
      else (to_jsonb(a.job) || jsonb_build_object('id', (a.job).id::text))::text end
$$;
