-- Scheduler $2 of queue $1, locked for a "run now" (a worker's tick of it waits for this transaction), with the
-- database clock in whole ms (as sql/due-schedulers.sql).
select s.*, floor(extract(epoch from now()) * 1000)::float8 as now_ms
from :PGONCE_SCHEMA.job_schedulers s
where s.queue = $1 and s.id = $2
for update
