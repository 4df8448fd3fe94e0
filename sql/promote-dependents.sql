-- Housekeeping's safety net: moves up to $1 jobs out of 'waiting-children' whose every dependency has completed but
-- that nobody promoted (the jobs_finished trigger does it as each parent ends; a parent completed inside a REPEATABLE
-- READ transaction may not see its sibling's completion). Wakes their queues' idle workers.
with ready as (
  select c.id from :PGONCE_SCHEMA.jobs c
  where c.state = 'waiting-children'
    and not exists (
      select 1 from :PGONCE_SCHEMA.job_dependencies dep
      join :PGONCE_SCHEMA.jobs p on p.id = dep.depends_on
      where dep.job_id = c.id and p.state <> 'completed')
  order by c.id
  limit $1
  for update skip locked
), promoted as (
  update :PGONCE_SCHEMA.jobs c
  set state = case when c.run_at <= clock_timestamp() then 'waiting' else 'delayed' end, run_at = greatest(c.run_at, now())
  from ready r
  where c.id = r.id and c.state = 'waiting-children'
  returning c.queue
)
select (select count(*) from promoted)::integer as count,
  (select count(*) from (select distinct queue from promoted) q where :PGONCE_SCHEMA._wake(q.queue))::integer as woken
