-- Queue $1's limits (null: none) and the concurrency slots in use.
select s.concurrency, s.rate_max, s.rate_duration_ms,
  (select count(*) from :PGONCE_SCHEMA.limit_slots l
   where l.queue = $1 and l.group_id = '' and l.job_id is not null)::integer as slots_in_use
from (select 1) one left join :PGONCE_SCHEMA.queue_settings s on s.queue = $1
