-- Adds one plain job (no jobId, key, dependency or delay; DESIGN.md §2.1). While the queue has a due waiting job
-- there is no idle worker to wake or hand the job to (whoever added that job woke them; busy workers claim again on
-- their own): one INSERT, answered by id and created_at (the caller knows the rest). Otherwise add_job() decides,
-- answering as sql/add-job.sql does. The busy test reads the statement's snapshot, from before the INSERT, as
-- add_job() does; the plpgsql call and the job as JSON are what the busy path saves.
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
  select :PGONCE_SCHEMA.add_job(queue => $1, name => $2, data => $3::jsonb, priority => $4::integer,
    max_attempts => $5::integer, backoff => $6::jsonb, raise_rejection => false) as a
  from busy where not busy.yes
)
select 'added' as outcome, null::text as error, null::text as job,
  ins.id::text as id, extract(epoch from ins.created_at)::float8 * 1000 as created_at_ms
from ins
union all
select (d.a).outcome, (d.a).error, (to_jsonb((d.a).job) || jsonb_build_object('id', ((d.a).job).id::text))::text,
  null, null
from decided d
