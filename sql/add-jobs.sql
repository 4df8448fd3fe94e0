-- queue.addBulk of a batch with a jobId, key or dependency: _add_jobs(), all or nothing; a rejection comes back as
-- the only row, with "error". Parallel arrays, one element per item in the caller's order:
-- $1 queue, $2 names, $3 data, $4 jobIds, $5 dedup keys, $6 key TTLs ms, $7 extend, $8 replace, $9 delays ms,
-- $10 priorities, $11 max attempts, $12 backoffs, $13 dependsOn (each a bigint[] literal), $14 trace contexts,
-- $15 runAts (epoch ms, an item's delay when set: _delay_until(), on the database clock), $16 timeouts ms, $17 group
-- ids (null: no item has one; an item's group is set on the job it inserted, _group_admitted()).
select x.*
from :PGONCE_SCHEMA._add_jobs($1, $2::text[], $3::jsonb[], $4::text[], $5::text[], $6::bigint[], $7::boolean[],
  $8::boolean[], array(
    select coalesce(u.delay_ms, :PGONCE_SCHEMA._delay_until(to_timestamp(u.run_at_ms / 1000)))
    from unnest($9::bigint[], $15::float8[]) with ordinality u(delay_ms, run_at_ms, ord) order by u.ord),
  $10::integer[], $11::integer[], $12::jsonb[], $13::text[], $14::text[], $16::integer[]) a0,
  lateral (select case when $17::text[] is null then a0
                       else :PGONCE_SCHEMA._group_admitted(a0, ($17::text[])[a0.ordinal]) end as a offset 0) g,
  lateral :PGONCE_SCHEMA._answer(g.a) x
order by x.ordinal
