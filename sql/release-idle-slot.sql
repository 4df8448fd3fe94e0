-- On a worker's LISTEN connection: gives back idle slot $2 of queue $1 taken by sql/take-idle-slot.sql.
select pg_advisory_unlock(:PGONCE_SCHEMA._idle_slot_key($1, $2)) as released
