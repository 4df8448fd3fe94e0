-- Extends by $3 ms the leases of active jobs ($1 ids, $2 lock tokens) still held with those tokens; returns
-- their tokens (a missing one: lease lost) and whether queue.cancelJob asked the job to stop. Never past the run's
-- timeout_at (least() ignores a null one): a heartbeat does not extend a run past its timeout.
-- Each job is found by primary key: "state || ''" keeps any plan from driving the update from the jobs_leases partial
-- index, whose row estimate (the leases at the last ANALYZE) is often far too small.
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md).
update :PGONCE_SCHEMA.jobs j
set locked_until = least(now() + make_interval(secs => $3::bigint / 1000.0), j.timeout_at)
from unnest($1::bigint[], $2::uuid[]) as i(id, token)
where j.id = i.id and :PGONCE_SCHEMA._holds_lease(j.state || '') and j.lock_token = i.token and :PGONCE_SCHEMA._keep_index(j.id)
returning j.lock_token as token, j.cancel_requested_at is not null as cancel_requested
