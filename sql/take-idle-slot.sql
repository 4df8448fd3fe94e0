-- On a worker's LISTEN connection: takes the first free idle slot of queue $1 (a session advisory lock, released by
-- sql/release-idle-slot.sql or when the connection ends); its number, or no row when all four are taken. While a slot
-- is held, adds to the queue NOTIFY (see _wake in the migrations).
select s.slot
from generate_series(0, 3) s(slot)
where pg_try_advisory_lock(:PGONCE_SCHEMA._idle_slot_key($1, s.slot))
limit 1
