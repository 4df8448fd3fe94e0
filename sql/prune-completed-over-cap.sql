-- Housekeeping: deletes up to $2 completed jobs of queue $1 beyond its max_completed newest ones (no cap: nothing),
-- oldest first, except those _prunable() keeps.
with cap as (
  select coalesce(s.max_completed, d.max_completed) as keep
  from :PGONCE_SCHEMA._retention_defaults() d
  left join :PGONCE_SCHEMA.queue_settings s on s.queue = $1
), doomed as (
  select j.id from :PGONCE_SCHEMA.jobs j
  where j.queue = $1 and j.state = 'completed' and :PGONCE_SCHEMA._is_terminal(j.state)
    and (select keep from cap) is not null
    and j.finished_at < (
      select k.finished_at from :PGONCE_SCHEMA.jobs k
      where k.queue = $1 and k.state = 'completed' and :PGONCE_SCHEMA._is_terminal(k.state)
      order by k.finished_at desc offset greatest((select keep from cap) - 1, 0) limit 1)
    and :PGONCE_SCHEMA._prunable(j)
  order by j.finished_at
  limit $2
  for update of j skip locked
), gone as (
  delete from :PGONCE_SCHEMA.jobs j using doomed d where j.id = d.id returning 1
)
select count(*)::integer as count from gone
