-- Starts claimed-ahead jobs that got a free handler slot ($1 ids, $2 lock tokens; a lease of $3 ms from now):
-- 'claimed' -> 'active', the run counted. One row per job started; a job missing from the answer was superseded,
-- cancelled or removed, or its lease was taken over, and must not run. Committed without waiting for the WAL flush
-- (synchronous_commit off for this transaction only): a start lost in a crash leaves its job claimed, and the rescue
-- puts it back. Found by primary key, as in sql/complete-jobs.sql.
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md, 000018).
update :PGONCE_SCHEMA.jobs j
set state = 'active', attempts = j.attempts + 1, started_at = now(),
    locked_until = now() + make_interval(secs => $3::bigint / 1000.0)
from unnest($1::bigint[], $2::uuid[]) as i(id, token)
where j.id = i.id and j.state || '' = 'claimed' and j.lock_token = i.token and :PGONCE_SCHEMA._keep_index(j.id)
  and set_config('synchronous_commit', 'off', true) is not null
returning j.lock_token as token, j.state, j.attempts
