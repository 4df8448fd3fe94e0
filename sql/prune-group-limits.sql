-- Housekeeping: deletes up to $1 rows of each kind of group limit row that holds nothing (correctness never depends on
-- this having run; docs/flow-control.md, "Group limits"): free slots (job_id null) of groups without a queued job, rate
-- rows last used before the queue's group window began (any, once the queue has no group rate limit), and ended
-- ctx.rateLimit holds of groups. A claim makes a missing slot or rate row again with its upsert, a missing rate row
-- counts as unused as one this old does, and a missing hold holds nothing: so the tables keep the groups in use, not
-- every group id ever seen. Each row is locked (SKIP LOCKED) and re-checked on its newest version before it goes.
with slots as (
  select l.queue, l.group_id, l.slot from :PGONCE_SCHEMA.limit_slots l
  where l.group_id <> '' and l.job_id is null
    and not exists (
      select 1 from :PGONCE_SCHEMA.jobs j
      where j.queue = l.queue and j.group_id = l.group_id and :PGONCE_SCHEMA._is_queued(j.state))
  limit $1
  for update of l skip locked
), slots_gone as (
  delete from :PGONCE_SCHEMA.limit_slots l using slots s
  where l.queue = s.queue and l.group_id = s.group_id and l.slot = s.slot and l.job_id is null
  returning 1
), rates as (
  select r.queue, r.group_id, r.slot from :PGONCE_SCHEMA.limit_rate_slots r
  left join :PGONCE_SCHEMA.queue_settings q on q.queue = r.queue
  where r.group_id <> '' and (q.group_rate_max is null
    or r.used_at <= now() - make_interval(secs => q.group_rate_duration_ms / 1000.0))
  limit $1
  for update of r skip locked
), rates_gone as (
  delete from :PGONCE_SCHEMA.limit_rate_slots r using rates x
  where r.queue = x.queue and r.group_id = x.group_id and r.slot = x.slot
  returning 1
), holds as (
  select h.queue, h.group_id from :PGONCE_SCHEMA.limit_groups h
  where h.paused_until <= now()
  limit $1
  for update skip locked
), holds_gone as (
  delete from :PGONCE_SCHEMA.limit_groups g using holds h
  where g.queue = h.queue and g.group_id = h.group_id and g.paused_until <= now()
  returning 1
)
select ((select count(*) from slots_gone) + (select count(*) from rates_gone) + (select count(*) from holds_gone))::integer
  as count
