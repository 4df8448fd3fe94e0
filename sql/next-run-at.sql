-- Milliseconds until the next delayed job of queue $1 is due, by the database clock (null: none). Asked after an empty
-- claim: anything waiting and due would have been claimed. Through jobs_delayed, not jobs_due: no walk past the index
-- entries of rows claims took.
select case when min(run_at) is null then null
  else greatest(0, extract(epoch from (min(run_at) - now())) * 1000)::float8 end as wait_ms
from :PGONCE_SCHEMA.jobs
where queue = $1 and state = 'delayed'
