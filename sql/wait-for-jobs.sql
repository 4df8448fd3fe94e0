-- queue.waitForJob (src/wait-for-job.ts): the jobs $2 of queue $1 as they are, after marking those not yet ended
-- (jobs.waited), so that their end NOTIFYs their id (the jobs_waited trigger). A row locked by a transaction in flight
-- (a claim, a completion) is skipped rather than waited for: the waits' next poll reads it again and marks it then, and
-- a completion that commits meanwhile is seen by that read. The answer is the statement's snapshot, taken before the
-- marks: the mark changes nothing a reader sees.
with marked as (
  update :PGONCE_SCHEMA.jobs j set waited = true
  where j.id in (
    select w.id from :PGONCE_SCHEMA.jobs w
    where w.id = any($2::bigint[]) and w.queue = $1 and not w.waited and not :PGONCE_SCHEMA._is_terminal(w.state)
    for no key update skip locked)
  returning j.id
)
select * from :PGONCE_SCHEMA.jobs where id = any($2::bigint[]) and queue = $1
