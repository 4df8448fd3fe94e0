-- Job $1 with what its page shows beside it: whether its queue is paused, how many parents it still waits on, and
-- whether its run time is still to come (database clock).
select j.*,
       :PGONCE_SCHEMA._queue_paused(j.queue) as queue_paused,
       j.run_at > now() as not_due,
       (select count(*)::integer from :PGONCE_SCHEMA.job_dependencies d
        join :PGONCE_SCHEMA.jobs p on p.id = d.depends_on
        where d.job_id = j.id and p.state <> 'completed') as open_parents
from :PGONCE_SCHEMA.jobs j
where j.id = $1 and :PGONCE_SCHEMA._keep_index(j.id)
