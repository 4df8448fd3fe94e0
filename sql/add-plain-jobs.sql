-- queue.addBulk of plain items (no jobId, key or dependency: nothing to decide): the one INSERT of _insert_jobs() and
-- the wake-up rule, without the per-item admission rows of _add_jobs() (parsing 1,000 answer rows cost the client more
-- than the INSERT cost the server; measured in bench/README.md). Answered by one row: the new ids in input order,
-- comma-separated; now() in ms (every job's created_at; run_at = created_at + delay); the defaults used for what the
-- items left out. $1 queue, $2 names, $3 data, $4 delays ms, $5 priorities, $6 max attempts, $7 backoffs, $8 trace contexts.
with ins as (
  select j.id from :PGONCE_SCHEMA._insert_jobs($1, $2::text[], $3::jsonb[], null, null, $4::bigint[], $5::integer[],
    $6::integer[], $7::jsonb[], null, $8::text[]) j
)
select string_agg(ins.id::text, ',' order by ins.id) as ids, (extract(epoch from now()) * 1000)::float8 as now_ms,
  :PGONCE_SCHEMA._default_priority() as default_priority,
  :PGONCE_SCHEMA._default_max_attempts() as default_max_attempts, :PGONCE_SCHEMA._wake($1) as woken
from ins
