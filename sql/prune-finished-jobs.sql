-- Housekeeping: deletes up to $3 jobs of queue $1 in terminal state $2 that finished before their retention period
-- (completed and cancelled: completed_retention_ms; failed: failed_retention_ms; defaults from _retention_defaults()),
-- oldest first, except those _prunable() keeps. Their keys and dependency edges go with them.
-- The cutoff is a scalar subquery, computed once before the scan: so it bounds the jobs_finished range scan. (As a
-- joined CTE it was a join filter, and every round walked the queue's whole history, calling _prunable() on each row:
-- 0.7 s a queue with 100,000 completed jobs inside their retention period.)
with doomed as (
  select j.id from :PGONCE_SCHEMA.jobs j
  where j.queue = $1 and j.state = $2 and :PGONCE_SCHEMA._is_terminal(j.state)
    and j.finished_at < (
      select now() - make_interval(secs => (case when $2 = 'failed'
          then coalesce(s.failed_retention_ms, d.failed_ms) else coalesce(s.completed_retention_ms, d.completed_ms) end) / 1000.0)
      from :PGONCE_SCHEMA._retention_defaults() d
      left join :PGONCE_SCHEMA.queue_settings s on s.queue = $1)
    and :PGONCE_SCHEMA._prunable(j)
  order by j.finished_at
  limit $3
  for update of j skip locked
), gone as (
  delete from :PGONCE_SCHEMA.jobs j using doomed d where j.id = d.id returning 1
)
select count(*)::integer as count from gone
