-- queue.add: one job through add_job(), the function SQL callers use too; a rejection comes back in "error".
-- A duplicate with nothing to decide is answered here by _admit_one()'s first, lock-free reads (same rules, same
-- answer) without its plpgsql calls: a live jobId generation (not with dependsOn, whose parents come first), else the
-- held key of a plain duplicate (an extend without a TTL never gets here: src/admission/request.ts refuses it).
-- Otherwise add_job(). bench/DECISIONS.md#duplicates-in-statement. Three answer columns (no ordinal).
-- $1 queue, $2 name, $3 data, $4 jobId, $5 key, $6 TTL ms, $7 extend, $8 replace, $9 delay ms, $10 priority,
-- $11 max attempts, $12 backoff, $13 dependsOn (bigint[]), $14 trace context, $15 runAt (epoch ms; not with $9),
-- $16 timeout ms, $17 group id.
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md).
with answered as materialized (
  select 'duplicate-job-id' as outcome, o from :PGONCE_SCHEMA.jobs o
  where $4::text is not null and $13::bigint[] is null
    and o.job_id = $4::text and :PGONCE_SCHEMA._is_live(o.state) and :PGONCE_SCHEMA._keep_index(o.id)
  union all
  select 'duplicate-key', o from :PGONCE_SCHEMA.dedup_keys k join :PGONCE_SCHEMA.jobs o on o.id = k.job_id
  where $5::text is not null and $4::text is null and $13::bigint[] is null
    and not coalesce($7::boolean, false) and not coalesce($8::boolean, false)
    and k.queue = $1::text and k.key = $5::text and :PGONCE_SCHEMA._key_held(k.expires_at, o.state)
    and :PGONCE_SCHEMA._keep_index(k.job_id) and :PGONCE_SCHEMA._keep_index(o.id)
)
select x.outcome, x.error, x.job
from answered h, lateral :PGONCE_SCHEMA._answer(cast(row(1, h.outcome, null, h.o) as :PGONCE_SCHEMA.admission)) x
union all
select x.outcome, x.error, x.job
from :PGONCE_SCHEMA.add_job(queue => $1, name => $2, data => $3::jsonb, job_id => $4, dedup_id => $5,
  dedup_ttl_ms => $6, dedup_extend => $7, dedup_replace => $8, delay_ms => $9, priority => $10, max_attempts => $11,
  backoff => $12::jsonb, depends_on => $13::bigint[], raise_rejection => false, trace_context => $14,
  run_at => to_timestamp($15::float8 / 1000), timeout_ms => $16::integer, group_id => $17::text) a,
  lateral :PGONCE_SCHEMA._answer(a) x
where not exists (select 1 from answered)
