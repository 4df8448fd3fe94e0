-- The live generation of a custom jobId, else its newest terminal one.
select * from :PGONCE_SCHEMA.jobs
where job_id = $1
order by (state in ('waiting', 'delayed', 'waiting-children', 'active')) desc, id desc
limit 1
