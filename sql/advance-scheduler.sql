-- Scheduler $2 of queue $1 ticked at $3 (ms): its next tick is $4 (ms).
update :PGONCE_SCHEMA.job_schedulers
set last_run_at = to_timestamp($3::float8 / 1000), next_run_at = to_timestamp($4::float8 / 1000)
where queue = $1 and id = $2
