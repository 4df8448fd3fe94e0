-- Adds one plain job (no jobId, key, dependency or delay; DESIGN.md §2.1): nothing to decide, so add_job() is not
-- called. While the queue has a due waiting job there is no idle worker to wake or hand the job to (whoever added that
-- job woke them; busy workers claim again on their own): one bare INSERT. Otherwise _insert_job(), the part of
-- add_job() that inserts, hands the job to an idle worker (inserted already active for it) or wakes the workers with
-- NOTIFY. The busy test reads the statement's snapshot, from before the INSERT, as _insert_job() does.
-- Either way the answer is the few columns the caller does not know (id, state, attempts, lock, created_at), not the
-- job as JSON: the rest is the caller's own request.
with busy as materialized (
  select exists (
    select 1 from :PGONCE_SCHEMA.jobs w
    where w.queue = $1 and w.state = 'waiting' and w.run_at <= now()) as yes
), ins as (
  insert into :PGONCE_SCHEMA.jobs (queue, name, data, priority, max_attempts, backoff)
  select $1, $2, $3::jsonb, coalesce($4::integer, 0), coalesce($5::integer, 1), $6::jsonb
  from busy where busy.yes
  returning id, created_at
), decided as (
  -- A job without jobId never meets the ON CONFLICT of _insert_job(): it always comes back inserted.
  select :PGONCE_SCHEMA._insert_job($1, $2, $3::jsonb, null, null, null, $4::integer, $5::integer, $6::jsonb, null) as j
  from busy where not busy.yes
)
select ins.id::text as id, 'waiting' as state, 0 as attempts, null::text as lock_token, null::float8 as locked_until_ms,
  extract(epoch from ins.created_at)::float8 * 1000 as created_at_ms
from ins
union all
select ((d.j).id)::text, (d.j).state, (d.j).attempts, ((d.j).lock_token)::text,
  extract(epoch from (d.j).locked_until)::float8 * 1000, extract(epoch from (d.j).created_at)::float8 * 1000
from decided d
