-- queue.add: one job through add_job(), the function SQL callers use too (the rules live in the migrations:
-- _admit_one, _insert_jobs, _wake); a rejection comes back in "error", never as an exception.
-- A plain duplicate (a key without extend or replace, no jobId, no dependency) whose key is held is answered here, by
-- the lock-free read that _admit_one() starts with (the same rule, _key_held(), and the same answer, _answer()),
-- without the two plpgsql calls: W5 and W7 in bench/README.md, "Duplicates answered in the statement". Anything
-- else, and a key that is not held, goes to add_job().
-- $1 queue, $2 name, $3 data (JSON text), $4 jobId, $5 dedup key, $6 key TTL ms, $7 extend, $8 replace, $9 delay ms,
-- $10 priority, $11 max attempts, $12 backoff (JSON text), $13 dependsOn (bigint[]), $14 trace context.
with held as materialized (
  select o from :PGONCE_SCHEMA.dedup_keys k join :PGONCE_SCHEMA.jobs o on o.id = k.job_id
  where $5::text is not null and $4::text is null and $13::bigint[] is null
    and not coalesce($7::boolean, false) and not coalesce($8::boolean, false)
    and k.queue = $1::text and k.key = $5::text and :PGONCE_SCHEMA._key_held(k.expires_at, o.state)
)
select x.*
from held h, lateral :PGONCE_SCHEMA._answer(cast(row(1, 'duplicate-key', null, h.o) as :PGONCE_SCHEMA.admission)) x
union all
select x.*
from :PGONCE_SCHEMA.add_job(queue => $1, name => $2, data => $3::jsonb, job_id => $4, dedup_id => $5,
  dedup_ttl_ms => $6, dedup_extend => $7, dedup_replace => $8, delay_ms => $9, priority => $10, max_attempts => $11,
  backoff => $12::jsonb, depends_on => $13::bigint[], raise_rejection => false, trace_context => $14) a,
  lateral :PGONCE_SCHEMA._answer(a) x
where not exists (select 1 from held)
