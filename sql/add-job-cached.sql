-- queue.add of a keyed job with the Redis layer on, outside a caller's transaction (src/cache/dedup-precheck.ts):
-- add-job.sql's add_job() and answer, then _cache_key_state() after it: whether the job answered holds the key with a
-- TTL and until when, the epoch of the key's bucket, whether this add bumps the bucket at commit, the database clock;
-- and how long to wait after the commit when the epoch cannot be raised in Redis (_cache_settle_ms, docs/redis.md).
-- $1 queue, $2 name, $3 data (JSON text), $4 jobId, $5 dedup key, $6 key TTL ms, $7 extend, $8 replace, $9 delay ms,
-- $10 priority, $11 max attempts, $12 backoff (JSON text), $13 dependsOn (bigint[]), $14 trace context, $15 runAt
-- (epoch ms; not with $9), $16 timeout ms, $17 group id.
select x.outcome, x.error, x.job, c.owned as cache_owned, c.key_expires_ms as cache_expires_ms, c.epoch::text as cache_epoch,
       c.will_bump as cache_will_bump, c.now_ms as cache_now_ms,
       case when c.will_bump then :PGONCE_SCHEMA._cache_settle_ms(true) else 0 end as cache_settle_ms
from :PGONCE_SCHEMA.add_job(queue => $1, name => $2, data => $3::jsonb, job_id => $4, dedup_id => $5,
  dedup_ttl_ms => $6, dedup_extend => $7, dedup_replace => $8, delay_ms => $9, priority => $10, max_attempts => $11,
  backoff => $12::jsonb, depends_on => $13::bigint[], raise_rejection => false, trace_context => $14,
  run_at => to_timestamp($15::float8 / 1000), timeout_ms => $16::integer, group_id => $17::text) a,
  lateral :PGONCE_SCHEMA._answer(a) x,
  -- (a.job).id makes the planner call it after add_job().
  lateral :PGONCE_SCHEMA._cache_key_state($1, $5, (a.job).id) c
