-- Moves up to $2 jobs out of 'waiting-children' whose every dependency has completed: dependents of jobs $1, or any ($1 null, housekeeping).
with ready as (
  select c.id from :PGONCE_SCHEMA.jobs c
  where c.state = 'waiting-children'
    and c.id in (
      select dep.job_id from :PGONCE_SCHEMA.job_dependencies dep
      where $1::bigint[] is null or dep.depends_on = any($1::bigint[]))
    and not exists (
      select 1 from :PGONCE_SCHEMA.job_dependencies dep
      join :PGONCE_SCHEMA.jobs p on p.id = dep.depends_on
      where dep.job_id = c.id and p.state <> 'completed')
  order by c.id
  limit $2
  for update skip locked
), promoted as (
  update :PGONCE_SCHEMA.jobs c
  set state = case when c.run_at <= now() then 'waiting' else 'delayed' end
  from ready r
  where c.id = r.id and c.state = 'waiting-children'
  returning c.queue
), woken as (
  select pg_notify(:PGONCE_CHANNEL, q.queue) from (select distinct queue from promoted) q
)
select (select count(*) from promoted)::integer as count, (select count(*) from woken)::integer as woken
