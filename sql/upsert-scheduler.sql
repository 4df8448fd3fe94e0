-- Creates or replaces scheduler $2 of queue $1: every $3 ms, or cron pattern $4 in time zone $5; the job template
-- ($6 name, $7 data, $8 options as JSON); the first tick at $9 (ms since the epoch, computed from the database clock).
-- Replacing a scheduler restarts its schedule. Wakes the queue's workers so that they re-read their schedules.
with saved as (
  insert into :PGONCE_SCHEMA.job_schedulers as s
    (queue, id, every_ms, pattern, tz, job_name, job_data, job_opts, next_run_at)
  values ($1, $2, $3::bigint, $4, $5, $6, $7::jsonb, $8::jsonb, to_timestamp($9::float8 / 1000))
  on conflict (queue, id) do update set
    every_ms = excluded.every_ms, pattern = excluded.pattern, tz = excluded.tz, job_name = excluded.job_name,
    job_data = excluded.job_data, job_opts = excluded.job_opts, next_run_at = excluded.next_run_at, updated_at = now()
  returning s.*
)
select saved.*, pg_notify(:PGONCE_CHANNEL, '!schedulers ' || saved.queue) is not null as notified from saved
