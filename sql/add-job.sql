-- queue.add: one job through add_job(), the function SQL callers use too (the rules live in the migrations:
-- _admit_one, _insert_jobs, _wake); a rejection comes back in "error", never as an exception.
-- $1 queue, $2 name, $3 data (JSON text), $4 jobId, $5 dedup key, $6 key TTL ms, $7 extend, $8 replace, $9 delay ms,
-- $10 priority, $11 max attempts, $12 backoff (JSON text), $13 dependsOn (bigint[]), $14 trace context.
select x.*
from :PGONCE_SCHEMA.add_job(queue => $1, name => $2, data => $3::jsonb, job_id => $4, dedup_id => $5,
  dedup_ttl_ms => $6, dedup_extend => $7, dedup_replace => $8, delay_ms => $9, priority => $10, max_attempts => $11,
  backoff => $12::jsonb, depends_on => $13::bigint[], raise_rejection => false, trace_context => $14) a,
  lateral :PGONCE_SCHEMA._answer(a) x
