-- Job $1 with what its page shows beside it: whether its queue is paused, how many parents it still waits on,
-- whether its run time is still to come (database clock), and which flow-control limit holds it back now (the held_jobs
-- view: 'concurrency', 'rateLimit', 'ctx.rateLimit'; null: none) with its queue's limits.
select j.*,
       :PGONCE_SCHEMA._queue_paused(j.queue) as queue_paused,
       j.run_at > now() as not_due,
       (select count(*)::integer from :PGONCE_SCHEMA.job_dependencies d
        join :PGONCE_SCHEMA.jobs p on p.id = d.depends_on
        where d.job_id = j.id and p.state <> 'completed') as open_parents,
       (select h.held_by from :PGONCE_SCHEMA.held_jobs h where h.id = j.id) as held_by,
       s.concurrency as limit_concurrency, s.rate_max as limit_rate_max, s.rate_duration_ms as limit_rate_duration_ms,
       s.rate_paused_until as limit_held_until
from :PGONCE_SCHEMA.jobs j
left join :PGONCE_SCHEMA.queue_settings s on s.queue = j.queue
where j.id = $1 and :PGONCE_SCHEMA._keep_index(j.id)
