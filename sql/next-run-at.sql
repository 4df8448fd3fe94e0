-- Milliseconds until something of queue $1 may be startable again, by the database clock (null: nothing known). Asked
-- after an empty claim: anything waiting and due would have been claimed, unless a limit held it. The earliest of:
-- the next delayed job's run_at (through jobs_delayed, not jobs_due: no walk past the index entries of rows claims
-- took); the end of a ctx.rateLimit hold of the queue or of one of its groups; and, for a rate limit whose window is
-- full, the time its oldest start in the window leaves it (the queue's rows, and any group's). So a rate-limited
-- queue starts its next jobs when its window allows, not at the next poll (docs/flow-control.md).
with s as materialized (
  select q.* from :PGONCE_SCHEMA.queue_settings q where q.queue = $1
)
select case when t.at is null then null
  else greatest(0, extract(epoch from (t.at - now())) * 1000)::float8 end as wait_ms
from (select least(
  (select min(j.run_at) from :PGONCE_SCHEMA.jobs j where j.queue = $1 and j.state = 'delayed'),
  (select s.rate_paused_until from s where s.rate_paused_until > now()),
  (select min(g.paused_until) from :PGONCE_SCHEMA.limit_groups g where g.queue = $1 and g.paused_until > now()),
  (select min(r.used_at + make_interval(secs => s.rate_duration_ms / 1000.0))
   from s join :PGONCE_SCHEMA.limit_rate_slots r on r.queue = s.queue and r.group_id = '' and r.slot <= s.rate_max
   where r.used_at > now() - make_interval(secs => s.rate_duration_ms / 1000.0)),
  (select min(r.used_at + make_interval(secs => s.group_rate_duration_ms / 1000.0))
   from s join :PGONCE_SCHEMA.limit_rate_slots r on r.queue = s.queue and r.group_id <> '' and r.slot <= s.group_rate_max
   where r.used_at > now() - make_interval(secs => s.group_rate_duration_ms / 1000.0))
) as at) t
