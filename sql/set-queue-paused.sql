-- Pauses ($2 true) or resumes ($2 false) queue $1 for every worker (they check it in each claim); on resume, wakes its
-- idle workers. paused: the setting now.
with saved as (
  insert into :PGONCE_SCHEMA.queue_settings as s (queue, paused) values ($1, $2)
  on conflict (queue) do update set paused = excluded.paused, updated_at = now()
  returning s.paused
)
select paused, case when not paused then :PGONCE_SCHEMA._wake($1) else false end as woken from saved
