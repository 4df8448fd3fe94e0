-- Queue $1's limits (null: none), the concurrency slots in use, its group limits and the group slots in use (all
-- groups).
select s.concurrency, s.rate_max, s.rate_duration_ms,
  (select count(*) from :PGONCE_SCHEMA.limit_slots l
   where l.queue = $1 and l.group_id = '' and l.job_id is not null)::integer as slots_in_use,
  s.group_concurrency, s.group_rate_max, s.group_rate_duration_ms,
  (select count(*) from :PGONCE_SCHEMA.limit_slots l
   where l.queue = $1 and l.group_id <> '' and l.job_id is not null)::integer as group_slots_in_use
from (select 1) one left join :PGONCE_SCHEMA.queue_settings s on s.queue = $1
