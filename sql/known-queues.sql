-- Every queue this schema has seen, by name: one with a job, a settings row or a scheduler. The
-- jobs are read by loose scans of the partial indexes (one probe per queue), never a scan of the table.
with recursive queued as (
  (select queue from :PGONCE_SCHEMA.jobs where :PGONCE_SCHEMA._is_queued(state) order by queue limit 1)
  union all
  select n.queue from queued q, lateral (
    select j.queue from :PGONCE_SCHEMA.jobs j
    where :PGONCE_SCHEMA._is_queued(j.state) and j.queue > q.queue order by j.queue limit 1) n
), finished as (
  (select queue from :PGONCE_SCHEMA.jobs where :PGONCE_SCHEMA._is_terminal(state) order by queue limit 1)
  union all
  select n.queue from finished f, lateral (
    select j.queue from :PGONCE_SCHEMA.jobs j
    where :PGONCE_SCHEMA._is_terminal(j.state) and j.queue > f.queue order by j.queue limit 1) n
)
select queue from queued
union select queue from finished
union select queue from :PGONCE_SCHEMA.jobs where :PGONCE_SCHEMA._holds_lease(state)
union select queue from :PGONCE_SCHEMA.jobs where state = 'waiting-children'
union select queue from :PGONCE_SCHEMA.queue_settings
union select queue from :PGONCE_SCHEMA.job_schedulers
order by queue
