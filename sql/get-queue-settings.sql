-- Queue $1's settings with the defaults filled in for what it does not set.
select coalesce(s.paused, false) as paused,
  coalesce(s.completed_retention_ms, d.completed_ms) as completed_retention_ms,
  coalesce(s.failed_retention_ms, d.failed_ms) as failed_retention_ms,
  coalesce(s.max_completed, d.max_completed) as max_completed
from :PGONCE_SCHEMA._retention_defaults() d
left join :PGONCE_SCHEMA.queue_settings s on s.queue = $1
