-- Scheduler $2 of queue $1 added a job by hand at $3 (ms): its last run is now; its next tick stays.
update :PGONCE_SCHEMA.job_schedulers set last_run_at = to_timestamp($3::float8 / 1000) where queue = $1 and id = $2
