-- Sets queue $1's limits (docs/flow-control.md): concurrency $2, rate limit $3 starts per $4 ms; $5 and $6 say which
-- of the two this call sets (a null then clears it); the same per group: group concurrency $7, group rate limit $8
-- starts per $9 ms, set when $10 and $11 say so. A concurrency of N has slots 1..N (limit_slots): the missing ones
-- are added, free ones past N deleted; a held one past N is never taken again (a claim takes slots <= N only) and goes
-- at the next change once freed. Rate rows are only added, never deleted: one past max is not taken, and keeps the
-- time of its last start should max grow again within the window. A group's slot and rate rows are made by the claims
-- that take them (sql/claim-jobs-grouped.sql). Wakes the queue's idle workers.
with saved as (
  insert into :PGONCE_SCHEMA.queue_settings as s (queue, concurrency, rate_max, rate_duration_ms, group_concurrency,
    group_rate_max, group_rate_duration_ms)
  values ($1, $2::integer, $3::integer, $4::bigint, $7::integer, $8::integer, $9::bigint)
  on conflict (queue) do update set
    concurrency = case when $5::boolean then excluded.concurrency else s.concurrency end,
    rate_max = case when $6::boolean then excluded.rate_max else s.rate_max end,
    rate_duration_ms = case when $6::boolean then excluded.rate_duration_ms else s.rate_duration_ms end,
    group_concurrency = case when $10::boolean then excluded.group_concurrency else s.group_concurrency end,
    group_rate_max = case when $11::boolean then excluded.group_rate_max else s.group_rate_max end,
    group_rate_duration_ms = case when $11::boolean then excluded.group_rate_duration_ms else s.group_rate_duration_ms end,
    updated_at = now()
  returning s.concurrency, s.rate_max
), added_slots as (
  insert into :PGONCE_SCHEMA.limit_slots (queue, group_id, slot)
  select $1, '', g from saved, generate_series(1, coalesce(saved.concurrency, 0)) g
  on conflict do nothing
), pruned_slots as (
  delete from :PGONCE_SCHEMA.limit_slots l using saved
  where l.queue = $1 and l.group_id = '' and l.job_id is null and l.slot > coalesce(saved.concurrency, 0)
), added_rates as (
  insert into :PGONCE_SCHEMA.limit_rate_slots (queue, group_id, slot)
  select $1, '', g from saved, generate_series(1, coalesce(saved.rate_max, 0)) g
  on conflict do nothing
)
select :PGONCE_SCHEMA._wake($1) as woken
