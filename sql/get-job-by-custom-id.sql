-- The live generation of custom jobId $1 (jobIds are unique among live jobs across every queue, so this may be a job
-- of another queue: check job.queue), else its newest terminal one.
-- Each lookup by id or key carries `(id > 0 or _prefer_index(id))` (ids start at 1): it keeps its index when the session
-- planned this with the tables small (migration 000018).
select * from :PGONCE_SCHEMA.jobs
where job_id = $1 and (id > 0 or :PGONCE_SCHEMA._prefer_index(id))
order by :PGONCE_SCHEMA._is_live(state) desc, id desc
limit 1
