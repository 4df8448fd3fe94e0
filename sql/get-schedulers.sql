-- The schedulers of queue $1, by id.
select * from :PGONCE_SCHEMA.job_schedulers where queue = $1 order by id
