-- On a worker's LISTEN connection: takes the first free idle slot of queue $1 (a session advisory lock, released by
-- sql/release-idle-slot.sql or when the connection ends); its number, or no row when all four are taken. While a slot
-- is held, adds to the queue NOTIFY (see _wake in the migrations). With a slot, and when $2 (the worker's id) is given
-- because the worker has a free handler slot, it also takes that worker's hand-off lock: plain adds then hand their
-- jobs to it (_hand_off_target, migration 000008); "handoffs" says whether it did.
with slot as (
  select s.slot
  from generate_series(0, 3) s(slot)
  where pg_try_advisory_lock(:PGONCE_SCHEMA._idle_slot_key($1, s.slot))
  limit 1
)
select slot.slot, $2::text is not null and pg_try_advisory_lock(:PGONCE_SCHEMA._handoff_key($2::text)) as handoffs
from slot
