-- Milliseconds until the next pending job of queue $1 is due, by the database clock (null: nothing pending).
-- One index probe per distinct priority (a loose index scan of jobs_due), not a scan of every pending job.
with recursive priorities as (
  (select priority from :PGONCE_SCHEMA.jobs
   where queue = $1 and state in ('waiting', 'delayed')
   order by priority limit 1)
  union all
  select (select j.priority from :PGONCE_SCHEMA.jobs j
          where j.queue = $1 and j.state in ('waiting', 'delayed') and j.priority > p.priority
          order by j.priority limit 1)
  from priorities p
  where p.priority is not null
)
select case when s.next is null then null
  else greatest(0, extract(epoch from (s.next - now())) * 1000)::float8 end as wait_ms
from (
  select min((select j.run_at from :PGONCE_SCHEMA.jobs j
              where j.queue = $1 and j.state in ('waiting', 'delayed') and j.priority = p.priority
              order by j.run_at limit 1)) as next
  from priorities p
  where p.priority is not null
) s
