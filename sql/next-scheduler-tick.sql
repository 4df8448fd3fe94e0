-- Milliseconds until the next tick of any scheduler of queue $1 (null: none).
select greatest(0, extract(epoch from (min(next_run_at) - now())) * 1000)::float8 as wait_ms
from :PGONCE_SCHEMA.job_schedulers where queue = $1
