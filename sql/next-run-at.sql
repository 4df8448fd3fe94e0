-- Milliseconds until the next pending job of queue $1 is due, by the database clock (null: nothing pending).
select greatest(0, extract(epoch from (min(run_at) - now())) * 1000)::float8 as wait_ms
from :PGONCE_SCHEMA.jobs
where queue = $1 and state in ('waiting', 'delayed')
