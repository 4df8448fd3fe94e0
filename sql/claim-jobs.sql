-- Claims up to $2 due jobs of queue $1 for worker $4, in the fetch order (priority, run_at, id), starting after the
-- worker's cursor ($6 priority, $7 run_at in microseconds since the epoch, exact, as the run_at_us column answers it;
-- $8 id; the head of the queue is (-2147483648, year -1199, 0)), and starts them: 'active', attempt counted,
-- started_at set, a lease of $3 ms. A worker claims only what it starts (docs/workers.md, "Fetching"). A paused
-- queue gives nothing, nor does a queue with a limit (docs/flow-control.md): its claims are sql/claim-jobs-limited.sql.
-- A job's run times out at timeout_at: started_at plus its timeout_ms, else the worker's timeoutMs ($9, null: none); the
-- lease never outlasts it (docs/workers.md#timeouts).
-- Lock tokens: the worker chooses their first 8 bytes ($5, 'xxxxxxxx-xxxx-xxxx-') before it sends the claim, the job
-- id gives the last 8 (unique per job and claim, which is all the fence needs). A worker whose claim's answer was lost
-- can so give back what the claim took (sql/release-lost-claim.sql) without knowing the jobs.
-- Seeking past the cursor skips the index entries of the rows earlier claims took (dead until VACUUM, and not even
-- removable while another transaction holds back the xmin horizon); the worker scans from the head again regularly.
-- The cursor's run_at is exact (run_at_us: a ms figure in float8 rounds, and a cursor stepped back to be safe put
-- every job sharing that run_at, e.g. a whole bulk load, after it: the seek fell back to the start of the batch and
-- walked its dead prefix: claims of 250 from 4 to 8 ms over a 600,000-job drain; bench/DECISIONS.md#claim-cursor).
-- Committed without waiting for the WAL flush (synchronous_commit off for this transaction only): a claim lost in a
-- server crash leaves the job waiting, as if the worker had died before claiming; outcomes are still flushed.
-- The rows are updated through the ctids their lock returned, in one array (a TID scan, not a second index descent
-- per row). The answer is `_as_claimed()` over `row(c.*)`, which the planner reduces to plain columns (over a whole-row
-- `returning j` it took the 26-column row apart once per field; bench/DECISIONS.md, "Statement and schema forms").
-- _keep_index(): the TID scan whatever the statistics were when a session planned this (docs/architecture.md).
-- Not on the pick: its LIMIT is a parameter, planned as a tenth of the queue's rows, so the qual's cost would grow with
-- the queue and cross jit_above_cost; the pick keeps jobs_due unless the table was analysed at a few dozen rows.
with picked as materialized (
  select array(
    select ctid from :PGONCE_SCHEMA.jobs
    where queue = $1 and :PGONCE_SCHEMA._is_queued(state) and run_at <= now()
      and (priority, run_at, id) > ($6::integer, timestamptz 'epoch' + $7::bigint * interval '1 microsecond', $8::bigint)
      and not :PGONCE_SCHEMA._queue_held($1)
    order by priority, run_at, id
    limit $2
    for update skip locked) as ctids
), claimed as (
  update :PGONCE_SCHEMA.jobs j
  set state = 'active', attempts = j.attempts + 1, started_at = now(),
      lock_token = ($5::text || overlay(lpad(to_hex(j.id), 16, '0') placing '-' from 5 for 0))::uuid,
      timeout_at = now() + make_interval(secs => coalesce(j.timeout_ms, $9::integer) / 1000.0),
      locked_until = least(now() + make_interval(secs => $3::bigint / 1000.0),
        now() + make_interval(secs => coalesce(j.timeout_ms, $9::integer) / 1000.0)),
      locked_by = $4
  where j.ctid = any((select p.ctids from picked p)::tid[]) and set_config('synchronous_commit', 'off', true) is not null
    and :PGONCE_SCHEMA._keep_index(j.id)
  returning j.*
)
select x.*, (extract(epoch from c.run_at) * 1000000)::bigint::text as run_at_us, c.timeout_ms
from claimed c, lateral :PGONCE_SCHEMA._as_claimed(cast(row(c.*) as :PGONCE_SCHEMA.jobs)) x
order by x.priority, x.run_at_ms, x.id
