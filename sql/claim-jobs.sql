-- Claims up to $2 due jobs of queue $1 for worker $5, in the fetch order (priority, run_at, id), starting after the
-- worker's cursor ($6 priority, $7 run_at in microseconds since the epoch, exact, as the run_at_us column answers it;
-- $8 id; the head of the queue is (-2147483648, year -1199, 0)): the
-- first $3 become 'active' (the worker starts their handlers at once: attempt counted, started_at set), the rest
-- 'claimed' (held under the lease, handler not started: still pending for replace, cancel and removal; the worker
-- starts them with sql/step-jobs.sql). Each gets a lock token and a lease of $4 ms. A paused queue gives nothing.
-- Seeking past the cursor skips the index entries of the rows earlier claims took (dead until VACUUM, and not even
-- removable while another transaction holds back the xmin horizon); the worker scans from the head again regularly.
-- The cursor's run_at is exact (run_at_us: a ms figure in float8 rounds, and a cursor stepped back to be safe put
-- every job sharing that run_at, e.g. a whole bulk load, after it: the seek fell back to the start of the batch and
-- walked its dead prefix: claims of 250 from 4 to 8 ms over a 600,000-job drain; bench/README.md, "A long history").
-- Committed without waiting for the WAL flush (synchronous_commit off for this transaction only): a claim lost in a
-- server crash leaves the job waiting, as if the worker had died before claiming; outcomes are still flushed.
-- Lock tokens: one random uuid per statement gives the first 8 bytes, the job id the last 8 (unique per job and claim,
-- which is all the fence needs; gen_random_uuid() per row cost 1 µs of a ~8 µs row).
-- The rows are updated through the ctids their lock returned, in one array (a TID scan, not a second index descent
-- per row); a job is among the first $3 by its place in that array, and `$3 >= $2` (a claim that starts all it
-- takes, the usual case) is folded away when the statement is planned, so that case tests nothing per row. The answer
-- is `_as_claimed()` over `row(c.*)`, which the planner reduces to plain columns (over a whole-row `returning j` it
-- took the 26-column row apart once per field). Against the earlier form (an ordinality join, `returning j`): a
-- 250-job claim 4.70 -> 3.91 ms (4a0a88e's claim 3.34), bench/README.md, "The claim statement".
-- _keep_index(): the TID scan whatever the statistics were when a session planned this (docs/architecture.md, 000018).
-- Not on the pick: its LIMIT is a parameter, planned as a tenth of the queue's rows, so the qual's cost would grow with
-- the queue and cross jit_above_cost; the pick keeps jobs_due unless the table was analysed at a few dozen rows.
with picked as materialized (
  select array(
    select ctid from :PGONCE_SCHEMA.jobs
    where queue = $1 and :PGONCE_SCHEMA._is_queued(state) and run_at <= now()
      and (priority, run_at, id) > ($6::integer, timestamptz 'epoch' + $7::bigint * interval '1 microsecond', $8::bigint)
      and not :PGONCE_SCHEMA._queue_paused($1)
    order by priority, run_at, id
    limit $2
    for update skip locked) as ctids
), claimed as (
  update :PGONCE_SCHEMA.jobs j
  -- "Started now" is tested in three columns (an UPDATE cannot join a lateral on its target; precomputing the first
  -- $3 ctids as a column of `picked` cost 0.3 ms a 250-job claim, ~7%).
  set state = case when $3::integer >= $2 or j.ctid = any((select p.ctids[:$3::integer] from picked p)::tid[]) then 'active' else 'claimed' end,
      lock_token = ((select left(gen_random_uuid()::text, 19)) || overlay(lpad(to_hex(j.id), 16, '0') placing '-' from 5 for 0))::uuid,
      locked_until = now() + make_interval(secs => $4::bigint / 1000.0),
      locked_by = $5,
      attempts = j.attempts + case when $3::integer >= $2 or j.ctid = any((select p.ctids[:$3::integer] from picked p)::tid[]) then 1 else 0 end,
      started_at = case when $3::integer >= $2 or j.ctid = any((select p.ctids[:$3::integer] from picked p)::tid[]) then now() end
  where j.ctid = any((select p.ctids from picked p)::tid[]) and set_config('synchronous_commit', 'off', true) is not null
    and :PGONCE_SCHEMA._keep_index(j.id)
  returning j.*
)
select x.*, (extract(epoch from c.run_at) * 1000000)::bigint::text as run_at_us
from claimed c, lateral :PGONCE_SCHEMA._as_claimed(cast(row(c.*) as :PGONCE_SCHEMA.jobs)) x
order by x.priority, x.run_at_ms, x.id
