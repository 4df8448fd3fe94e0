-- On a worker's LISTEN connection: gives back idle slot $2 of queue $1 taken by sql/take-idle-slot.sql, and the
-- hand-off lock of worker $3 when it is given (taken with the slot).
select pg_advisory_unlock(:PGONCE_SCHEMA._idle_slot_key($1, $2)) as released,
  $3::text is not null and pg_advisory_unlock(:PGONCE_SCHEMA._handoff_key($3::text)) as handoffs_released
