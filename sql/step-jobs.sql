-- A worker's step (the migration's _step_jobs): completes jobs whose handlers returned ($1 ids, $2 lock tokens, $3
-- results as JSON text) and starts claimed-ahead jobs that got a slot ($4 ids, $5 lock tokens, lease $6 ms). One row
-- per job changed: completed or cancelled, or active (started, with its run counted). A completion keeps the run's
-- token on the row (sql/outcome-recorded.sql); what follows a job's end is the jobs_finished trigger's.
select token, state, attempts
from :PGONCE_SCHEMA._step_jobs($1::bigint[], $2::uuid[], $3::text[], $4::bigint[], $5::uuid[], $6::bigint)
