-- The cache layer's view of Postgres (src/cache/epoch-listener.ts, src/cache/cache.ts): the epochs of buckets $1 (null:
-- all 256), the database clock, and when the server started (a restart or a restore is detected by it).
select bucket, epoch::text as epoch, (extract(epoch from clock_timestamp()) * 1000)::float8 as now_ms,
       (extract(epoch from pg_postmaster_start_time()) * 1000)::float8 as server_started_ms
from :PGONCE_SCHEMA.cache_epochs
where $1::integer[] is null or bucket = any($1::integer[])
order by bucket
