-- The queue and state of job $1 (an action finds the Queue to act through).
select j.queue, j.state from :PGONCE_SCHEMA.jobs j where j.id = $1 and :PGONCE_SCHEMA._keep_index(j.id)
