-- The dashboard's queues $1 with their settings (defaults filled in): paused, retention.
select q.queue,
       coalesce(s.paused, false) as paused,
       coalesce(s.completed_retention_ms, d.completed_ms) as completed_retention_ms,
       coalesce(s.failed_retention_ms, d.failed_ms) as failed_retention_ms,
       coalesce(s.max_completed, d.max_completed) as max_completed
from unnest($1::text[]) as q(queue)
cross join :PGONCE_SCHEMA._retention_defaults() d
left join :PGONCE_SCHEMA.queue_settings s on s.queue = q.queue
order by q.queue
