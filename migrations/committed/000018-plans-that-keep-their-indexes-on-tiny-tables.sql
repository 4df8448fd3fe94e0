--! Previous: sha1:547a51fce81e5ca3130be195027ff238237cef98
--! Hash: sha1:f2e2bc02cbe8853894e420bcaf315aec83c60e7b
--! Message: plans that keep their indexes on tiny tables

-- Plans that keep their indexes when a table's statistics say it is tiny (bench/README.md, "W5 after VACUUM ANALYZE").
-- A session caches one generic plan per statement, made at its sixth run, and makes it again only when a table's
-- statistics change. Vacuumed or analysed while nearly empty (a fresh install, a queue just pruned), dedup_keys and
-- jobs are planned as one page, where a sequential scan costs less than an index. With autovacuum off, or until its next
-- analyse, that plan stays while the tables grow: every keyed add scanned them (W5 after VACUUM ANALYZE at about 0.6-0.75x
-- its rate on tables never analysed), and a worker started on a small queue completed every batch by scanning the whole
-- table (7x slower). The statements that find jobs or keys by id or key carry the qual below.

-- Never true, and declared expensive: in a qual `(x or _prefer_index(id))` whose x holds for every row the statement
-- wants, a sequential scan is charged 2.5 cost units for each row of the table, an index scan only for the rows it
-- fetches. Analysed at a given size, a lookup of one id or key keeps its index from 4 rows (without the qual: from
-- ~400), a lookup of a list of ids (a generic plan assumes ten) from ~20 rows (without: somewhere between 1,000 and
-- 5,000). A table never analysed is planned as at least ten pages, so it keeps them too. The qual's cost stays low enough
-- that a plan does not cross jit_above_cost (100,000) below ~9,000 ids in one statement. At run time x is true and the
-- function is never called: an index scan drops the qual its condition implies, and OR stops at its first true
-- argument. PostgreSQL has no per-query hints, and a top-level statement cannot carry a planner setting.
-- Not for a claim's pick: its LIMIT is a parameter, planned as a tenth of the queue, so the qual's cost would grow with
-- the queue and cross jit_above_cost.
create or replace function :PGONCE_SCHEMA._prefer_index(p_id bigint) returns boolean
language plpgsql immutable cost 1000 as $$
begin
  return false;
end
$$;

-- The plpgsql functions of an add that decides (_admit_one(): a jobId, a key or a dependency, for a single add and for
-- each such item of a batch; _lock_admission(): the locks an extend, a replace or a dependency takes first) plan their
-- statements with sequential scans priced out, for the same reason: a key read went from ~4 to ~50 µs. The setting is
-- set and restored around each call (~0.5 µs).
alter function :PGONCE_SCHEMA._admit_one(text, text, jsonb, text, text, bigint, boolean, boolean, bigint, integer,
  integer, jsonb, bigint[], text) set enable_seqscan = off;
alter function :PGONCE_SCHEMA._lock_admission(text, text[], text[], boolean[], boolean[], text[]) set enable_seqscan = off;
