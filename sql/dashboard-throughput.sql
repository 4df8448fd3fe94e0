-- Jobs of queue $1 completed and failed in each of the last 60 minutes (minute 0: the current one), by the database
-- clock. Reads jobs_finished (queue, state, finished_at) for the last hour only: index entries, not the whole history.
select floor(extract(epoch from (now() - finished_at)) / 60)::integer as minutes_ago, state, count(*)::integer as jobs
from :PGONCE_SCHEMA.jobs
where queue = $1 and state in ('completed', 'failed') and :PGONCE_SCHEMA._is_terminal(state)
  and finished_at > now() - interval '1 hour'
group by 1, 2
