-- ctx.rateLimit(ms, { scope: 'group' }): no job of the group of job $1 (run $2, lock token) starts before
-- now() + $3 ms (limit_groups.paused_until; a later hold already set stays). The queue's group_paused_until keeps the
-- latest hold of any of its groups, so that its claims go through sql/claim-jobs-grouped.sql, which obeys it.
-- Answers whether the run still holds the job (held) and whether the job has a group (grouped); nothing is written
-- when either is false.
with j as (
  select j.queue, j.group_id from :PGONCE_SCHEMA.jobs j where j.id = $1 and j.lock_token = $2::uuid
), g as (
  select j.queue, j.group_id, now() + make_interval(secs => $3::bigint / 1000.0) as until
  from j where j.group_id is not null
), held_group as (
  insert into :PGONCE_SCHEMA.limit_groups as l (queue, group_id, paused_until)
  select g.queue, g.group_id, g.until from g
  on conflict (queue, group_id) do update set paused_until = greatest(l.paused_until, excluded.paused_until)
), held_queue as (
  insert into :PGONCE_SCHEMA.queue_settings as s (queue, group_paused_until)
  select g.queue, g.until from g
  on conflict (queue) do update
    set group_paused_until = greatest(s.group_paused_until, excluded.group_paused_until), updated_at = now()
)
select exists (select 1 from j) as held, exists (select 1 from g) as grouped
