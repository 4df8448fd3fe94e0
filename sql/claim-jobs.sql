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
-- which is all the fence needs; gen_random_uuid() per row cost 1 µs of a ~8 µs row). The rows are updated through the
-- ctids their lock returned (a TID scan, not a second index descent per row).
with picked as (
  select p.ctid, p.ord
  from unnest(array(
    select ctid from :PGONCE_SCHEMA.jobs
    where queue = $1 and :PGONCE_SCHEMA._is_queued(state) and run_at <= now()
      and (priority, run_at, id) > ($6::integer, timestamptz 'epoch' + $7::bigint * interval '1 microsecond', $8::bigint)
      and not :PGONCE_SCHEMA._queue_paused($1)
    order by priority, run_at, id
    limit $2
    for update skip locked)) with ordinality p(ctid, ord)
), claimed as (
  update :PGONCE_SCHEMA.jobs j
  set state = case when p.ord <= $3 then 'active' else 'claimed' end,
      lock_token = ((select left(gen_random_uuid()::text, 19)) || overlay(lpad(to_hex(j.id), 16, '0') placing '-' from 5 for 0))::uuid,
      locked_until = now() + make_interval(secs => $4::bigint / 1000.0),
      locked_by = $5,
      attempts = j.attempts + case when p.ord <= $3 then 1 else 0 end,
      started_at = case when p.ord <= $3 then now() end
  from picked p
  where j.ctid = p.ctid and set_config('synchronous_commit', 'off', true) is not null
  returning j
)
select x.*, (extract(epoch from (c.j).run_at) * 1000000)::bigint::text as run_at_us
from claimed c, lateral :PGONCE_SCHEMA._as_claimed(c.j) x
order by x.priority, x.run_at_ms, x.id
