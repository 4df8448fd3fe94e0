-- An idle worker ($4, with $2 free handler slots) takes jobs of queue $1 that other workers claimed ahead and have not
-- started (they wait behind those workers' running handlers), and starts them at once: active, attempt counted, a new
-- lock token and a lease of $3 ms. Their first claimer learns it from its start statement (the token changed) and drops
-- them; nothing of theirs ran. Sent only after a claim found nothing due.
-- _keep_index(): jobs_leases and the TID scan whatever the statistics were when a session planned this
-- (docs/architecture.md, 000018; claimed jobs are few, so unlike a claim's pick the qual's cost stays small).
with picked as (
  select ctid from :PGONCE_SCHEMA.jobs
  where queue = $1 and state = 'claimed' and locked_by <> $4 and not :PGONCE_SCHEMA._queue_paused($1)
    and :PGONCE_SCHEMA._keep_index(id)
  order by priority, run_at, id
  limit $2
  for update skip locked
), stolen as (
  update :PGONCE_SCHEMA.jobs j
  set state = 'active',
      lock_token = ((select left(gen_random_uuid()::text, 19)) || overlay(lpad(to_hex(j.id), 16, '0') placing '-' from 5 for 0))::uuid,
      locked_until = now() + make_interval(secs => $3::bigint / 1000.0),
      locked_by = $4, attempts = j.attempts + 1, started_at = now()
  where j.ctid = any(array(select ctid from picked)) and j.state = 'claimed' and :PGONCE_SCHEMA._keep_index(j.id)
  returning j.*
)
-- The answer as sql/claim-jobs.sql gives it (run_at_us: the cursor's run_at).
select x.*, (extract(epoch from c.run_at) * 1000000)::bigint::text as run_at_us
from stolen c, lateral :PGONCE_SCHEMA._as_claimed(cast(row(c.*) as :PGONCE_SCHEMA.jobs)) x
order by x.priority, x.run_at_ms, x.id
