-- Jobs of one queue per state; a delayed job that is due counts as waiting.
select case when state = 'delayed' and run_at <= now() then 'waiting' else state end as state,
       count(*)::integer as count
from :PGONCE_SCHEMA.jobs
where queue = $1
group by 1
