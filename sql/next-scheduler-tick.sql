-- Milliseconds until the next tick of any scheduler of queue $1 (null: none). The CASE matters: greatest() ignores a
-- null, so greatest(0, null) is 0, and a worker whose queue has no scheduler looked again every 5 ms.
select case when min(next_run_at) is null then null
  else greatest(0, extract(epoch from (min(next_run_at) - now())) * 1000)::float8 end as wait_ms
from :PGONCE_SCHEMA.job_schedulers where queue = $1
