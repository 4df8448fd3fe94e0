-- The live generation of custom jobId $1 (jobIds are unique among live jobs across every queue, so this may be a job
-- of another queue: check job.queue), else its newest terminal one.
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md).
select * from :PGONCE_SCHEMA.jobs
where job_id = $1 and :PGONCE_SCHEMA._keep_index(id)
order by :PGONCE_SCHEMA._is_live(state) desc, id desc
limit 1
