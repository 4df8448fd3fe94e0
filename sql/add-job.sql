-- Admits one job through add_job() (DESIGN.md §2.1-2.2); a rejection comes back in "error", not as an exception.
-- The job comes back as one JSON text (id as a string): parsing it costs the client half of what 20 typed columns do.
-- A plain duplicate (a key without extend/replace, no jobId, no dependency) whose key is held is answered here with
-- its owner, without the plpgsql call: the same lock-free read add_job() starts with (same rules, same snapshot
-- semantics), at 30-40% less server time. Anything else, and a key that is not held, goes to add_job().
with held as materialized (
  select o from :PGONCE_SCHEMA.dedup_keys k join :PGONCE_SCHEMA.jobs o on o.id = k.job_id
  where $5::text is not null and $4::text is null and $13::bigint[] is null
    and not coalesce($7::boolean, false) and not coalesce($8::boolean, false)
    and k.queue = $1 and k.key = $5
    and (k.expires_at > now()
         or (k.expires_at is null and o.state in ('waiting', 'delayed', 'waiting-children', 'active')))
), decided as (
  select :PGONCE_SCHEMA.add_job(
    queue => $1, name => $2, data => $3::jsonb, job_id => $4,
    dedup_id => $5, dedup_ttl_ms => $6, dedup_extend => $7, dedup_replace => $8,
    delay_ms => $9, priority => $10, max_attempts => $11, backoff => $12::jsonb,
    depends_on => $13::bigint[], raise_rejection => false) as a
  where not exists (select 1 from held)
)
select 'duplicate-key' as outcome, null::text as error,
  (to_jsonb(h.o) || jsonb_build_object('id', (h.o).id::text))::text as job
from held h
union all
select (d.a).outcome, (d.a).error,
  (to_jsonb((d.a).job) || jsonb_build_object('id', ((d.a).job).id::text))::text
from decided d
