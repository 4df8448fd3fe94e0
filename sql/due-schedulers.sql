-- The schedulers of queue $1 whose tick has come, locked for this transaction (another worker's tick skips them):
-- whoever holds the lock adds the tick's job and moves next_run_at on before committing. now_ms: the database clock.
-- Both in whole ms (a next_run_at written by hand with microseconds ticks at its millisecond), as in sql/db-now.sql.
select s.*, floor(extract(epoch from s.next_run_at) * 1000)::float8 as next_run_at_ms,
  floor(extract(epoch from now()) * 1000)::float8 as now_ms
from :PGONCE_SCHEMA.job_schedulers s
where s.queue = $1 and s.next_run_at <= now()
order by s.next_run_at
limit 100
for update skip locked
