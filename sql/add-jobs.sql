-- Admits a batch through add_jobs(): all or nothing; a rejection comes back as a single row with "error".
-- A job this batch inserted (added, replaced) comes back as id, state and times only: the caller knows the rest,
-- unless add_job() handed it to an idle worker (active: attempt, lease and lock token are the server's).
-- A job that answers for an item (duplicate, extended, a rejection's owner) comes back whole, as JSON text.
-- Few columns per row: parsing 1,000 full job rows cost the client more than the INSERT cost the server.
select a.ordinal, a.outcome, a.error, (a.job).id, (a.job).state,
  (extract(epoch from (a.job).run_at) * 1000)::float8 as run_at_ms,
  (extract(epoch from (a.job).created_at) * 1000)::float8 as created_at_ms,
  case when a.outcome is null or a.outcome not in ('added', 'replaced') or (a.job).state = 'active'
    then (to_jsonb(a.job) || jsonb_build_object('id', (a.job).id::text))::text end as job
from :PGONCE_SCHEMA.add_jobs($1, $2::jsonb) a
