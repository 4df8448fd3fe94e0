-- queue.promoteJob: delayed job $2 of queue $1 becomes due now ('waiting', run_at no later than now()), by its id and
-- its state in one fenced UPDATE: the row is locked first, so a job a worker claimed, or that was cancelled, removed
-- or retried meanwhile is read as it is now and left alone. Wakes the queue's idle workers, as any add of a due job.
-- No row: no such job in the queue; else its state as read (the promoted job's columns null unless it was delayed).
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md).
with target as (
  select id, state from :PGONCE_SCHEMA.jobs where id = $2 and queue = $1 and :PGONCE_SCHEMA._keep_index(id) for update
), promoted as (
  update :PGONCE_SCHEMA.jobs j
  set state = 'waiting', run_at = least(j.run_at, now())
  from target t
  where j.id = t.id and t.state = 'delayed' and j.state = 'delayed' and :PGONCE_SCHEMA._keep_index(j.id)
  returning j.*
)
select t.state as found_state, p.*, case when p.id is null then false else :PGONCE_SCHEMA._wake($1) end as woken
from target t left join promoted p on p.id = t.id
