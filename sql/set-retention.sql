-- Sets queue $1's retention: completed (and cancelled) jobs $2 ms, failed jobs $3 ms, at most $4 completed jobs;
-- $5, $6, $7 say which of the three this call sets (a null then means: back to the default).
insert into :PGONCE_SCHEMA.queue_settings as s (queue, completed_retention_ms, failed_retention_ms, max_completed)
values ($1, $2::bigint, $3::bigint, $4::integer)
on conflict (queue) do update set
  completed_retention_ms = case when $5::boolean then excluded.completed_retention_ms else s.completed_retention_ms end,
  failed_retention_ms = case when $6::boolean then excluded.failed_retention_ms else s.failed_retention_ms end,
  max_completed = case when $7::boolean then excluded.max_completed else s.max_completed end,
  updated_at = now()
