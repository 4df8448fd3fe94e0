-- Extends by $3 ms the leases of active jobs ($1 ids, $2 lock tokens) still held with those tokens; returns their tokens (a missing one: lease lost).
with mine as (
  -- Locked in id order, as complete-jobs.sql does, so that the two never deadlock.
  select j.id from :PGONCE_SCHEMA.jobs j
  join unnest($1::bigint[], $2::uuid[]) as i(id, token) on j.id = i.id
  where j.state = 'active' and j.lock_token = i.token
  order by j.id
  for update of j
)
update :PGONCE_SCHEMA.jobs j
set locked_until = now() + make_interval(secs => $3::bigint / 1000.0)
from mine m
where j.id = m.id
returning j.lock_token as token
