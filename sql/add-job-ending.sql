-- queue.add with extend or replace, without the Redis layer, outside a caller's transaction (src/cache/settle.ts):
-- add_job() and its answer, and how long to wait after the commit before answering: the settle interval when this add
-- ended a cached fact (moved a key held with a TTL, or brought its expiry forward) while a cache listener's lease
-- lasts, else 0 (docs/redis.md). $1 to $17 as in sql/add-job.sql.
select x.outcome, x.error, x.job,
       case when :PGONCE_SCHEMA._cache_bumps_pending() then :PGONCE_SCHEMA._cache_settle_ms(true) else 0 end as cache_settle_ms
from :PGONCE_SCHEMA.add_job(queue => $1, name => $2, data => $3::jsonb, job_id => $4, dedup_id => $5,
  dedup_ttl_ms => $6, dedup_extend => $7, dedup_replace => $8, delay_ms => $9, priority => $10, max_attempts => $11,
  backoff => $12::jsonb, depends_on => $13::bigint[], raise_rejection => false, trace_context => $14,
  run_at => to_timestamp($15::float8 / 1000), timeout_ms => $16::integer, group_id => $17::text) a,
  lateral :PGONCE_SCHEMA._answer(a) x
