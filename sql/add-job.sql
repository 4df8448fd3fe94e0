-- Admits one job through add_job() (DESIGN.md §2.1-2.2); a rejection comes back in "error", not as an exception.
-- The job comes back as one JSON text (id as a string): parsing it costs the client half of what 20 typed columns do.
select a.outcome, a.error,
  (to_jsonb(a.job) || jsonb_build_object('id', (a.job).id::text))::text as job
from :PGONCE_SCHEMA.add_job(
  queue => $1, name => $2, data => $3::jsonb, job_id => $4,
  dedup_id => $5, dedup_ttl_ms => $6, dedup_extend => $7, dedup_replace => $8,
  delay_ms => $9, priority => $10, max_attempts => $11, backoff => $12::jsonb,
  depends_on => $13::bigint[], raise_rejection => false) a
