-- How many jobs queue $1 has in each state, each count stopping at $2 (a count that reaches it is replaced by the
-- planner's estimate): never a walk of a whole state. Each count reads one partial index (jobs_due, jobs_delayed,
-- jobs_leases, jobs_waiting_children, jobs_finished). A delayed job that is due counts as waiting (as job_counts does).
select
  (select count(*) from (select 1 from :PGONCE_SCHEMA.jobs
     where queue = $1 and :PGONCE_SCHEMA._is_queued(state)
       and (state = 'waiting' or run_at <= now()) limit $2) x)::integer as waiting,
  (select count(*) from (select 1 from :PGONCE_SCHEMA.jobs
     where queue = $1 and state = 'delayed' and run_at > now() limit $2) x)::integer as delayed,
  (select count(*) from (select 1 from :PGONCE_SCHEMA.jobs
     where queue = $1 and state = 'waiting-children' limit $2) x)::integer as "waiting-children",
  (select count(*) from (select 1 from :PGONCE_SCHEMA.jobs
     where queue = $1 and :PGONCE_SCHEMA._holds_lease(state) limit $2) x)::integer as active,
  (select count(*) from (select 1 from :PGONCE_SCHEMA.jobs
     where queue = $1 and state = 'completed' and :PGONCE_SCHEMA._is_terminal(state) limit $2) x)::integer as completed,
  (select count(*) from (select 1 from :PGONCE_SCHEMA.jobs
     where queue = $1 and state = 'failed' and :PGONCE_SCHEMA._is_terminal(state) limit $2) x)::integer as failed,
  (select count(*) from (select 1 from :PGONCE_SCHEMA.jobs
     where queue = $1 and state = 'cancelled' and :PGONCE_SCHEMA._is_terminal(state) limit $2) x)::integer as cancelled
