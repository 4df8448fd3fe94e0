-- The cache's view of runOnce key $1 (src/cache/effects-precheck.ts), once it is done: when its done marker expires
-- (null: never), the epoch of its bucket, the database clock. No row: not done, or expired.
select (extract(epoch from k.expires_at) * 1000)::float8 as expires_ms, c.epoch::text as epoch,
       (extract(epoch from clock_timestamp()) * 1000)::float8 as now_ms
from :PGONCE_SCHEMA.execution_claims k
join :PGONCE_SCHEMA.cache_epochs c on c.bucket = :PGONCE_SCHEMA._cache_bucket('c ' || $1::text)
where k.key = $1::text and k.state = 'done' and (k.expires_at is null or k.expires_at > now())
