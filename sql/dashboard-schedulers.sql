-- Every scheduler of the schema (at most $1), by queue and id.
select s.queue, s.id, s.pattern, s.tz, s.every_ms, s.next_run_at, s.last_run_at, s.job_name, s.job_data, s.job_opts
from :PGONCE_SCHEMA.job_schedulers s
order by s.queue, s.id
limit $1
